"""``task: sft``: supervised fine-tuning on conversations or prompt/completion pairs, rendered
through a chat template. Only the answer tokens carry the loss: their logits alone are computed,
and each micro-batch (and evaluation batch) weighs by how many answer tokens it holds, so the
loss is the mean over every trained token whatever the batch split. Evaluations also answer
held-out prompts (exact match). The base may be another run's model (``run:<id>``)."""

from typing import Any

from clustertune.data.templates import KEY, compile_problem
from clustertune.tasks.base import Task


def _checks(recipe: Any, runs_root: str) -> list[tuple[str, str]]:
    """The chat template file compiles (a built-in one always does)."""
    problem = compile_problem(recipe.data.sft.chat_template)
    return [(KEY, problem)] if problem else []


SFT = Task(name="sft", summary="supervised fine-tuning on conversations",
           model_noun="A chat model (supervised fine-tuning on conversations)",
           loss_on_trained_tokens=True, generation_eval=True, base_model_from_run=True, checks=_checks)
