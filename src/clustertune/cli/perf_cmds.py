"""``estimate-memory`` and ``doctor``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from clustertune.cli.completion import complete_recipe
from clustertune.doctor import checks
from clustertune.errors import UserError
from clustertune.models.build import resolve_config
from clustertune.recipe.load import load_recipe

if TYPE_CHECKING:
    from clustertune.recipe.schema import Recipe


def _gib(n: int) -> str:
    return f"{n / 1024**3:.2f}"


def _fits(per_device: int, device_bytes: int) -> bool:
    # Leave ~10% for the CUDA context, allocator fragmentation and temporary buffers.
    return per_device <= 0.9 * device_bytes


def _memory_record(r: Recipe, shape: Any, world: int, mixed: bool, dev: tuple[str, int] | None,
                   rows: list[Any]) -> dict[str, Any]:
    """``estimate-memory --json``: sizes in bytes."""
    from clustertune.train import memory  # deferred: it imports torch

    return {
        "recipe": r.name, "parameters": shape.n_params, "trainable_parameters": shape.trainable,
        "micro_batch": r.train.batch_size, "sequence_length": r.sequence_length, "devices": world,
        "mixed_precision": mixed, "gradient_checkpointing": r.train.gradient_checkpointing,
        "gpu": {"name": dev[0], "bytes": dev[1]} if dev else None,
        "strategies": [{"strategy": e.strategy, "params": e.params, "grads": e.grads, "optimizer": e.optimizer,
                        "activations": e.activations, "buffers": e.buffers, "per_device": e.device_total,
                        "host": e.host, "fits": _fits(e.device_total, dev[1]) if dev else None} for e in rows],
        "notes": memory.gpu_notes(r.train.precision, memory.strategy_key(r.train), world, r.model.adapter is not None),
    }


def estimate_memory(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name.", autocompletion=complete_recipe),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides."),
    devices: Optional[int] = typer.Option(None, "--devices", min=1,
                                          help="Devices the run spans (default: from the recipe's launch section)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU to check against (H100, A100, ...); default: this machine's."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout (sizes in bytes)."),
) -> None:
    """Parameter, gradient, optimizer and activation memory per device for each strategy."""
    # Deferred: the estimator imports torch, which the CLI's start-up does without.
    from clustertune.api import devices_of
    from clustertune.train import memory

    r = load_recipe(recipe, overrides or [])
    world = devices or devices_of(r)
    config = resolve_config(r, None)
    if r.model.config is not None and r.model.tokenizer == "train":
        config.vocab_size = r.model.tokenizer_vocab_size  # the tokenizer is not trained yet
    # auto is bf16 or fp16 on every GPU, and a device estimate is for GPUs.
    mixed = r.train.precision in ("bf16", "fp16", "auto")
    # QLoRA's 4-bit base is not offloaded (the recipe refuses it).
    qlora = r.model.adapter is not None and r.model.adapter.type == "qlora"
    shown = [s for s in memory.STRATEGIES if not (qlora and "offload" in s)]
    rows = memory.estimate_all(r, config, world, mixed, shown)
    dev = memory.device_memory_bytes(gpu)
    if gpu is not None and dev is None:
        raise UserError(f"--gpu: unknown GPU {gpu!r}; known: {', '.join(memory.DEVICE_MEMORY_GB)}")
    shape = memory.model_shape(config, r.task, r)
    seq = r.sequence_length
    adapter = (f" ({r.model.adapter.type}: {shape.trainable / 1e6:.2f}M trainable)"
               if r.model.adapter is not None else "")
    if as_json:
        print(json.dumps(_memory_record(r, shape, world, mixed, dev, rows), indent=2))
        return
    print(f"{r.name}: {shape.n_params / 1e6:.1f}M parameters{adapter}, "
          f"micro-batch {r.train.batch_size} x {seq} tokens, "
          f"{world} device(s), {'mixed precision' if mixed else 'fp32'} activations"
          + (", activation checkpointing" if r.train.gradient_checkpointing else ""))
    cols = ["strategy", "params GiB", "grads GiB", "optimizer GiB", "activations GiB", "buffers GiB",
            "per device GiB", "host GiB"]
    if dev:
        cols.append(f"fits {dev[0]} ({dev[1] / 1e9:.0f} GB)")
    table = Table(*cols, box=None)
    for e in rows:
        cells = [e.strategy, _gib(e.params), _gib(e.grads), _gib(e.optimizer), _gib(e.activations),
                 _gib(e.buffers), _gib(e.device_total), _gib(e.host)]
        if dev:
            cells.append("yes" if _fits(e.device_total, dev[1]) else "no")
        table.add_row(*cells)
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)
    print("activations are an estimate; weights, gradients and optimizer state are exact for AdamW in fp32")
    for note in memory.gpu_notes(r.train.precision, memory.strategy_key(r.train), world, r.model.adapter is not None):
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
