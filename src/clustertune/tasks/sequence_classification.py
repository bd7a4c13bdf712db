"""``task: sequence_classification``: one label per text (``run_glue.py``'s reading of the
labels); evaluations report accuracy, and ``train.metrics`` on every prediction of the set. The
model may be another run's (``model.name_or_path: run:<id>``): a language model that a run
trained gets a fresh classification head."""

from clustertune.tasks.base import Task

SEQUENCE_CLASSIFICATION = Task(name="sequence_classification", summary="sequence classification",
                               model_noun="A sequence classifier", base_model_from_run=True)
