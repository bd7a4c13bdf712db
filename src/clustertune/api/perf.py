"""Estimating and measuring through the one door: memory per device for each strategy
(``estimate-memory``), and the side-by-side benchmark against transformers' Trainer (``bench``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from clustertune.api.runs import devices_of, with_base
from clustertune.errors import UserError
from clustertune.recipe.schema import Recipe
from clustertune.train import memory
from clustertune.train.bench import BenchSpec, report, run_side_by_side
from clustertune.train.bench_names import SIZES


@dataclass(frozen=True)
class MemoryReport:
    """What one recipe needs per device under each strategy, and the GPU it was checked against."""

    recipe: Recipe
    shape: Any  # train.memory.ModelShape: parameters, trainable parameters
    world: int
    mixed: bool
    device: tuple[str, int] | None  # (name, bytes)
    rows: list[Any]  # train.memory.MemoryEstimate, one per strategy
    notes: list[str]

    def fits(self, per_device: int) -> bool | None:
        """Whether ``per_device`` bytes fit the GPU (~10% left for the CUDA context, fragmentation
        and temporary buffers); None without a GPU to check against."""
        return per_device <= 0.9 * self.device[1] if self.device else None


def estimate_memory(recipe: Recipe, devices: int | None = None, gpu: str | None = None) -> MemoryReport:
    """Parameter, gradient, optimizer and activation memory per device for each strategy, for a
    run over ``devices`` (default: the recipe's launch section), against ``gpu`` (default: this
    machine's)."""

    recipe = with_base(recipe)  # a run:<run> base: that run's final model, as `run` takes it
    world = devices or devices_of(recipe)
    recipe, shape, mixed, rows = memory.estimate_recipe(recipe, world)
    dev = memory.device_memory_bytes(gpu)
    if gpu is not None and dev is None:
        raise UserError(f"--gpu: unknown GPU {gpu!r}; known: {', '.join(memory.DEVICE_MEMORY_GB)}")
    notes = memory.gpu_notes(recipe.train.precision, memory.strategy_key(recipe.train), world,
                             recipe.model.adapter is not None)
    return MemoryReport(recipe, shape, world, mixed, dev, rows, list(notes))


def bench(size: str, batches: list[int] | None, steps: int | None, skip: int | None, layers: int | None,
          repeats: int, variants: list[str], echo: Callable[[str], None]) -> list[str]:
    """Each variant (clustertune's loop compiled and eager, Trainer as is and tuned) measured in
    a fresh process at each batch size, ``repeats`` times in alternating order; the report's lines."""
    if size not in SIZES:
        raise UserError(f"--size: {size!r} is not one of {', '.join(SIZES)}")
    spec = BenchSpec.preset(size)
    spec = replace(spec, steps=steps if steps is not None else spec.steps,
                   skip=skip if skip is not None else spec.skip,
                   layers=layers if layers is not None else spec.layers)
    echo("measuring (each in a fresh process):")
    results = run_side_by_side(spec, variants, batches or [spec.batch], repeats, echo=echo)
    return report(spec, results)
