"""``estimate-memory`` and ``doctor``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from clustertune.cli.completion import complete_override, complete_recipe
from clustertune.doctor import checks
from clustertune import api

if TYPE_CHECKING:
    from clustertune.api.perf import MemoryReport


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2f}"


def _memory_record(m: MemoryReport) -> dict[str, Any]:
    """``estimate-memory --json``: sizes in bytes."""
    r = m.recipe
    return {
        "recipe": r.name, "parameters": m.shape.n_params, "trainable_parameters": m.shape.trainable,
        "micro_batch": r.train.batch_size, "sequence_length": r.sequence_length, "devices": m.world,
        "mixed_precision": m.mixed, "gradient_checkpointing": r.train.gradient_checkpointing,
        "gpu": {"name": m.device[0], "bytes": m.device[1]} if m.device else None,
        "strategies": [{"strategy": e.strategy, "params": e.params, "grads": e.grads, "optimizer": e.optimizer,
                        "activations": e.activations, "buffers": e.buffers, "per_device": e.device_total,
                        "host": e.host, "fits": m.fits(e.device_total)} for e in m.rows],
        "notes": m.notes,
    }


def estimate_memory(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name.", autocompletion=complete_recipe),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides.", autocompletion=complete_override),
    devices: Optional[int] = typer.Option(None, "--devices", min=1,
                                          help="Devices the run spans (default: from the recipe's launch section)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU to check against (H100, A100, ...); default: this machine's."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout (sizes in bytes)."),
) -> None:
    """Parameter, gradient, optimizer and activation memory per device for each strategy."""
    m = api.perf.estimate_memory(api.validate(recipe, overrides or [], need_base=True).recipe, devices, gpu)
    if as_json:
        print(json.dumps(_memory_record(m), indent=2))
        return
    r, shape = m.recipe, m.shape
    adapter = (f" ({r.model.adapter.type}: {shape.trainable / 1e6:.2f}M trainable)"
               if r.model.adapter is not None else "")
    print(f"{r.name}: {shape.n_params / 1e6:.1f}M parameters{adapter}, "
          f"micro-batch {r.train.batch_size} x {r.sequence_length} tokens, "
          f"{m.world} device(s), {'mixed precision' if m.mixed else 'fp32'} activations"
          + (", activation checkpointing" if r.train.gradient_checkpointing else ""))
    cols = ["strategy", "params GiB", "grads GiB", "optimizer GiB", "activations GiB", "buffers GiB",
            "per device GiB", "host GiB"]
    if m.device:
        cols.append(f"fits {m.device[0]} ({m.device[1] / 1e9:.0f} GB)")
    table = Table(*cols, box=None)
    for e in m.rows:
        cells = [e.strategy, _gib(e.params), _gib(e.grads), _gib(e.optimizer), _gib(e.activations),
                 _gib(e.buffers), _gib(e.device_total), _gib(e.host)]
        if m.device:
            cells.append("yes" if m.fits(e.device_total) else "no")
        table.add_row(*cells)
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)
    print("activations are an estimate; weights, gradients and optimizer state are exact for AdamW in fp32")
    for note in m.notes:
        print(note)

def doctor() -> None:
    """What clustertune finds on this machine: versions, GPUs, DeepSpeed, SLURM, SSH, hub, caches."""
    problems = 0
    for section, items in checks():
        print(section)
        for item in items:
            mark = "  ok  " if item.ok else "  !!  "
            print(f"{mark}{item.name:<22} {item.value}")
            if not item.ok:
                problems += 1
                print(f"        fix: {item.fix}")
    print(f"{problems} problem(s) found" if problems else "no problems found")
