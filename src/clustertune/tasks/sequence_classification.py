"""``task: sequence_classification``: one label per text (``run_glue.py``'s reading of the
labels); evaluations report accuracy, and ``train.metrics`` on every prediction of the set."""

from clustertune.tasks.base import Task

SEQUENCE_CLASSIFICATION = Task(name="sequence_classification", summary="sequence classification",
                               model_noun="A sequence classifier")
