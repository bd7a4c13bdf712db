"""``bench``: clustertune's training path against transformers' Trainer, side by side."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import typer

from clustertune.errors import UserError
from clustertune.train.bench import SIZES, BenchSpec, report, run_side_by_side


def _variants() -> tuple[str, ...]:
    # The CLI lists the variants in its help; clustertune.train.bench imports no torch at the top.
    from clustertune.train.bench import VARIANTS

    return VARIANTS


def bench(
    size: str = typer.Option("auto", "--size", help="Model: gpt2 (GPT-2 124M, sequence 1024), small "
                             "(4 layers, width 256, ~4M), tiny (2 layers, width 64), or auto (gpt2 on a GPU, tiny on CPU)."),
    batch: Optional[str] = typer.Option(None, "--batch", help="Batch sizes, comma-separated (e.g. 16,32): "
                                        "every variant runs at each."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimizer steps per measurement."),
    skip: Optional[int] = typer.Option(None, "--skip", help="Warm-up steps not counted (compilation)."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Override the number of layers."),
    repeats: int = typer.Option(1, "--repeats", help="Runs of each, alternating order; the median is "
                                "reported (use 3 or more on a shared or noisy machine)."),
    variants: str = typer.Option(",".join(_variants()), "--variants", help="Which to run, comma-separated."),
) -> None:
    """Tokens/s, MFU and peak memory of clustertune's loop (compiled and eager) and of
    Trainer (defaults, and with torch.compile + fused AdamW), each in its own process, with ratios."""

    if size not in SIZES:
        raise UserError(f"--size: {size!r} is not one of {', '.join(SIZES)}")
    spec = BenchSpec.preset(size)
    try:
        batches = [int(b) for b in batch.split(",")] if batch else [spec.batch]
    except ValueError:
        raise UserError(f"--batch: {batch!r} is not a comma-separated list of integers") from None
    spec = replace(spec, steps=steps if steps is not None else spec.steps,
                   skip=skip if skip is not None else spec.skip,
                   layers=layers if layers is not None else spec.layers)
    chosen = [v.strip() for v in variants.split(",") if v.strip()]
    print("measuring (each in a fresh process):", flush=True)
    results = run_side_by_side(spec, chosen, batches, repeats, echo=lambda s: print(s, flush=True))
    print("\n".join(report(spec, results)))
