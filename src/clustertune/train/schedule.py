"""The learning-rate schedule, for the supervised loop and for TRL's trainers alike.

Both take the scheduler's name and the number of warmup steps from here, so a supervised run
and an RL run of the same ``train`` section warm up and decay the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from clustertune.recipe.schema import Recipe, TrainSection, warmup_steps


def scheduler_name(t: TrainSection) -> str:
    """transformers' name for ``train.lr_scheduler`` ("constant" still warms up)."""
    return "constant_with_warmup" if t.lr_scheduler == "constant" else t.lr_scheduler


def _linear(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def _cosine(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))  # half a cosine, to 0 at the end


def _constant(step: int, warmup: int, total: int) -> float:
    return step / max(1.0, warmup) if step < warmup else 1.0


_FACTORS = {"linear": _linear, "cosine": _cosine, "constant_with_warmup": _constant}


def make_scheduler(recipe: Recipe, optimizer: Any, steps: int) -> Any:
    """The supervised loop's scheduler over ``steps`` optimizer steps: the factors of
    transformers' ``get_scheduler`` for the same name (tests/unit/train/test_schedule.py holds
    them equal step by step), written here because ``transformers.optimization`` imports peft
    through ``trainer_utils``, about 1 s of every rank's start. A ``LambdaLR`` over a
    ``functools.partial``, as there, so checkpoints of either load into the other."""
    import torch

    t = recipe.train
    factor = functools.partial(_FACTORS[scheduler_name(t)], warmup=warmup_steps(t, steps), total=steps)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


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
