"""The learning-rate schedule, for the supervised loop and for TRL's trainers alike.

Both take the scheduler's name and the number of warmup steps from here, so a supervised run
and an RL run of the same ``train`` section warm up and decay the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clustertune.recipe.schema import Recipe, TrainSection, warmup_steps


def scheduler_name(t: TrainSection) -> str:
    """transformers' name for ``train.lr_scheduler`` ("constant" still warms up)."""
    return "constant_with_warmup" if t.lr_scheduler == "constant" else t.lr_scheduler


def make_scheduler(recipe: Recipe, optimizer: Any, steps: int) -> Any:
    """The supervised loop's scheduler over ``steps`` optimizer steps."""
    from transformers import get_scheduler

    t = recipe.train
    return get_scheduler(scheduler_name(t), optimizer, num_warmup_steps=warmup_steps(t, steps), num_training_steps=steps)


@dataclass(frozen=True)
class RecipeSchedule:
    """The loop's scheduler factory: the recipe's schedule over ``steps`` optimizer steps. A
    strategy whose engine builds the scheduler itself (DeepSpeed from a user's JSON) reads
    ``steps`` to fill the JSON's step counts."""

    recipe: Recipe
    steps: int

    def __call__(self, optimizer: Any) -> Any:
        return make_scheduler(self.recipe, optimizer, self.steps)


def trainer_schedule(t: TrainSection) -> dict[str, Any]:
    """The same schedule as TrainingArguments for TRL's trainers. A run counted in epochs has no
    total yet: the ratio itself goes (a float below 1 is a ratio to TrainingArguments, which
    rounds it up over the steps it counts, as :func:`warmup_steps` does)."""
    if t.max_steps is None and not t.warmup_steps and t.warmup_ratio:
        return {"lr_scheduler_type": scheduler_name(t), "warmup_steps": float(t.warmup_ratio)}
    return {"lr_scheduler_type": scheduler_name(t), "warmup_steps": warmup_steps(t, t.max_steps or 0)}
