"""Checkpoints written and read as a one-process run writes and reads them: through
``checkpoint.save_distributed``/``load_distributed`` and the strategy train/execute.py makes for
it (Accelerate's DDP on the CPU, one process)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import TINY_CAUSAL


@contextmanager
def one_process_strategy() -> Iterator[Any]:
    """The ``ddp`` strategy of a run in one process (Accelerate's process-wide state cleared
    before and after, as make_accelerator does before a run)."""
    from accelerate import Accelerator

    from clustertune.recipe import load_recipe
    from clustertune.train.precision import reset_accelerate_state
    from clustertune.train.strategies.accel import AccelerateStrategy

    reset_accelerate_state()
    try:
        yield AccelerateStrategy(load_recipe(TINY_CAUSAL), Accelerator(cpu=True), sharded=False)
    finally:
        reset_accelerate_state()


def save_one_process(paths: Any, step: int, model: Any, optimizer: Any, scheduler: Any,
                     meta: dict[str, Any] | None = None, recipe_yaml: str = "", keep_last: int = 2) -> Path:
    """A sealed checkpoint of ``step`` (older ones pruned to ``keep_last``), as the loop writes it."""
    from clustertune.train import checkpoint as ckpt

    with one_process_strategy() as strategy:
        return ckpt.save_distributed(paths, step, strategy, model, optimizer, scheduler, meta or {}, recipe_yaml,
                                     keep_last)


def load_one_process(ckpt_dir: Path, model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Model, optimizer, scheduler and RNG restored from ``ckpt_dir`` as a resume restores them;
    its state.json."""
    from clustertune.train import checkpoint as ckpt

    with one_process_strategy() as strategy:
        return ckpt.load_distributed(ckpt_dir, strategy, model, optimizer, scheduler)
