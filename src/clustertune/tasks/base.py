"""The protocol every task follows, and the registry of tasks by the name recipes give them.

A task is what makes two runs on the same model and launcher differ: which tokens carry the
loss and with what weight, what an evaluation measures and reports, what its model card says,
and whether its trainer is clustertune's loop or one of TRL's. The layers below (data, models)
follow the traits a task's schema declares (:mod:`clustertune.recipe.task_traits`); training,
evaluation, the CLI and the launcher ask the task object here instead of testing its name.

This package may import errors, recipe, runs, models and data; it never imports train, use,
launch, api or cli (they sit above it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustertune.errors import UserError
from clustertune.recipe.task_traits import TaskTraits, traits_of

@dataclass(frozen=True)
class Task:
    """One task. Subclass it (or build one) and :func:`register` it to add a task."""

    name: str
    summary: str
    """What the task does, in a few words (the model card says "task `name` (summary)")."""

    model_noun: str
    """What a model trained this way is, as a model card's first words say it."""

    loss_on_trained_tokens: bool = False
    """The loss is a mean over the trained (answer) tokens only: logits are computed for those
    positions alone, micro-batches and evaluation batches weigh by how many each holds."""

    generation_eval: bool = False
    """Evaluations also generate answers to held-out prompts (exact match)."""

    base_model_from_run: bool = False
    """``run:<id>`` in :attr:`base_key` starts from another run's final model (``run:<id>@step-N``:
    its checkpoint of step N); a shipped recipe's run not trained yet (``run:quickstart``) is
    trained first. A task without it refuses a ``run:`` name there at validation."""

    base_key: str = "model.name_or_path"
    """The recipe key naming the model a run starts from (``section.field``)."""

    checks: Callable[[Any, str], list[tuple[str, str]]] | None = None
    """The task's own part of the preflight (``clustertune validate`` and the start of a run):
    called with the recipe and the runs root, returns (key, message with the fix) for every
    problem found without a GPU, the network or the data."""

    batch_loss: Callable[[Any, dict[str, Any], Callable[[Any, dict[str, Any]], Any]], Any] | None = None
    """The task's own loss: called with the model, one batch and the loop's forward call
    (``forward(model, batch)``), returns an output whose ``.loss`` the step minimises (and
    ``.logits`` where :meth:`correct` reads them). None: the model's own loss on the batch."""

    def output(self, model: Any, batch: dict[str, Any], forward: Callable[[Any, dict[str, Any]], Any]) -> Any:
        """The output of one batch, training or evaluating: the loop asks the task for it."""
        return self.batch_loss(model, batch, forward) if self.batch_loss is not None else forward(model, batch)

    def correct(self, out: Any, batch: dict[str, Any], n: int) -> Any:
        """How many of the batch's first ``n`` (real) samples the model got right: the predicted
        class against the label. None for a task whose evaluations count no right answers."""
        if not self.counts_correct:
            return None
        return (out.logits[:n].argmax(-1) == batch["labels"][:n]).sum()

    @property
    def counts_correct(self) -> bool:
        """Its evaluations report an accuracy (a classifier's)."""
        return self.predicts_labels

    def base_ref(self, recipe: Any) -> str | None:
        """What :attr:`base_key` holds in ``recipe`` (None where unset)."""
        section, _, field = self.base_key.partition(".")
        return getattr(getattr(recipe, section, None), field, None)

    def with_base(self, recipe: Any, ref: str) -> Any:
        """``recipe`` with :attr:`base_key` set to ``ref``."""
        section, _, field = self.base_key.partition(".")
        return recipe.model_copy(update={section: getattr(recipe, section).model_copy(update={field: ref})})

    def preflight(self, recipe: Any, runs_root: str) -> list[tuple[str, str]]:
        """Every problem of the task's own checks (none when it has none)."""
        return self.checks(recipe, runs_root) if self.checks is not None else []

    @property
    def traits(self) -> TaskTraits:
        traits = traits_of(self.name)
        if traits is None:
            raise UserError(f"task {self.name!r} has no traits in clustertune.recipe.task_traits")
        return traits

    @property
    def writes_text(self) -> bool:
        """Its model has a language-model head: `generate`, `chat` and `serve` apply."""
        return self.traits.head == "causal_lm"

    @property
    def prepares_data(self) -> bool:
        """Its data is prepared into the cache before training (else its trainer loads its own)."""
        return self.traits.data is not None

    @property
    def trained_by_trl(self) -> bool:
        """TRL's trainer runs its loop (rewards, preferences), not clustertune's."""
        return self.traits.trainer == "trl"

    @property
    def predicts_labels(self) -> bool:
        """Its model predicts a class per sample: evaluations count correct predictions and
        gather every one of them for ``train.metrics``."""
        return self.traits.head == "classifier"

    def weight(self, batch: dict[str, Any], real_rows: Any) -> Any:
        """What one evaluation batch counts for in the mean loss: its real samples, or, when the
        loss is over trained tokens, how many trained tokens it holds."""
        if self.loss_on_trained_tokens:
            return (batch["labels"][:, 1:] != -100).sum()
        return real_rows

    def summary_metrics(self, mean_loss: float, correct_fraction: float) -> dict[str, float]:
        """An evaluation's figures from its mean loss (and the fraction of correct predictions):
        accuracy for a classifier, perplexity for a language model."""
        if self.counts_correct:
            return {"eval_loss": mean_loss, "eval_accuracy": correct_fraction}
        return {"eval_loss": mean_loss, "eval_perplexity": math.exp(min(mean_loss, 700.0))}


TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Make ``task`` known by its name (the shipped tasks, a plugin's, a test's)."""
    TASKS[task.name] = task
    return task


def task_of(name: str) -> Task:
    """The task a recipe (or a run's record) names."""
    try:
        return TASKS[name]
    except KeyError:
        known = ", ".join(sorted(TASKS))
        raise UserError(f"task {name!r} is not known to this clustertune (known: {known})") from None


def find_task(name: str) -> Task | None:
    """The task of a run's record; None for a run that is not a recipe's (a user's command)."""
    return TASKS.get(name)
