"""``task: causal_lm``: next-token prediction on text packed into blocks (``run_clm.py``'s
grouping); evaluations report the mean loss per predicted token and its perplexity. The model may
be another run's (``model.name_or_path: run:<id>``, or ``run:<id>@step-N`` for a checkpoint):
continued pre-training."""

from clustertune.tasks.base import Task

CAUSAL_LM = Task(name="causal_lm", summary="causal language modelling",
                 model_noun="A causal language model", base_model_from_run=True)
