"""What every node-side trainer (the supervised loop and TRL's) needs from Accelerate's process
state: the mixed precision for this machine, and a reset between recipes in one process."""

from __future__ import annotations

import torch

from clustertune.errors import UserError
from clustertune.recipe.schema import Recipe
from clustertune.train.strategies.group import auto_precision, cpu_bf16, native_bf16


def auto_mixed_precision(strategy: str = "ddp") -> str:
    """Accelerate's mixed_precision that ``train.precision: auto`` stands for on this machine
    (``clustertune doctor`` reports it too)."""
    cuda = torch.cuda.is_available()
    # DeepSpeed runs on CPU ranks for tests only; its bf16 there is not a path worth choosing.
    on_cpu_bf16 = not cuda and strategy != "deepspeed" and cpu_bf16()
    return auto_precision(cuda, native_bf16(), on_cpu_bf16)


def mixed_precision(recipe: Recipe) -> str:
    """Accelerate's mixed_precision for this recipe on this machine."""
    p = recipe.train.precision
    if p == "auto":
        return auto_mixed_precision(recipe.train.strategy)
    if p == "fp16" and not torch.cuda.is_available():
        raise UserError("train.precision: fp16 needs a CUDA GPU; use bf16 or fp32 on CPU")
    return {"fp32": "no"}.get(p, p)


def reset_accelerate_state() -> None:
    """Accelerate keeps process-wide state; clear it so this process can run another recipe."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def recorded_name(mixed: str) -> str:
    """Accelerate's mixed_precision (``no``, ``bf16``, ``fp16``) as runs record it: fp32, bf16 or fp16."""
    return {"no": "fp32"}.get(mixed, mixed)


def precision_name(recipe: Recipe) -> str:
    """The precision a run of ``recipe`` computes in on this machine, as recorded: fp32, bf16 or fp16."""
    return recorded_name(mixed_precision(recipe))
