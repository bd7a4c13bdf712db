"""``bench``: clustertune's training path against transformers' Trainer, side by side."""

from __future__ import annotations

from typing import Optional

import typer

from clustertune import api
from clustertune.errors import UserError


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
    variants: str = typer.Option(",".join(api.bench_variants()), "--variants", help="Which to run, comma-separated."),
) -> None:
    """Tokens/s, MFU and peak memory of clustertune's loop (compiled and eager) and of
    Trainer (defaults, and with torch.compile + fused AdamW), each in its own process, with ratios."""

    try:
        batches = [int(b) for b in batch.split(",")] if batch else None
    except ValueError:
        raise UserError(f"--batch: {batch!r} is not a comma-separated list of integers") from None
    chosen = [v.strip() for v in variants.split(",") if v.strip()]
    lines = api.perf.bench(size, batches, steps, skip, layers, repeats, chosen, echo=lambda s: print(s, flush=True))
    print("\n".join(lines))
