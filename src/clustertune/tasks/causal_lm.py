"""``task: causal_lm``: next-token prediction on text packed into blocks (``run_clm.py``'s
grouping); evaluations report the mean loss per predicted token and its perplexity."""

from clustertune.tasks.base import Task

CAUSAL_LM = Task(name="causal_lm", summary="causal language modelling",
                 model_noun="A causal language model")
