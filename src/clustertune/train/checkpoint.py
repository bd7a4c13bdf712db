"""Self-describing, atomic checkpoints.

A checkpoint is a directory ``checkpoints/step-XXXXXXXX/`` holding the weights (safetensors),
optimizer, scheduler and RNG states, the data position, the resolved recipe and a
``state.json`` listing every file with its size and sha256. It is written under a temporary
name and renamed into place, so a directory with that name is complete; loading checks every
file against ``state.json`` and names the one that does not match.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clustertune.data.fingerprint import sha256_file
from clustertune.errors import CheckpointError
from clustertune.models.adapters import adapter_record, check_resume
from clustertune.runs.paths import RunPaths

FORMAT = 1
STATE = "state.json"
WEIGHTS = "model.safetensors"
OPTIMIZER = "optimizer.pt"
SCHEDULER = "scheduler.pt"
RNG = "rng.pt"
RECIPE = "recipe.yaml"



def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    paths: RunPaths,
    step: int,
    model: torch.nn.Module,
    optimizer: Any,
    scheduler: Any,
    meta: dict[str, Any],
    recipe_yaml: str,
    keep_last: int,
) -> Path:
    """Write a complete checkpoint for ``step`` of a single-process run and prune older ones."""
    from safetensors.torch import save_model

    final, tmp = _fresh_temp(paths, step)
    save_model(model, str(tmp / WEIGHTS))
    torch.save(optimizer.state_dict(), tmp / OPTIMIZER)
    torch.save(scheduler.state_dict(), tmp / SCHEDULER)
    _seal(tmp, final, step, meta, recipe_yaml)
    prune(paths, keep_last)
    return final


def save_distributed(
    paths: RunPaths,
    step: int,
    strategy: Any,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    meta: dict[str, Any],
    recipe_yaml: str,
    keep_last: int,
) -> Path:
    """Every rank calls this: each writes its part (its shards) through the strategy into one
    temp directory; the main process then lists every file with its checksum in state.json and
    renames the directory into place. Nobody returns before the rename, so a checkpoint a rank
    can see is complete."""
    final = paths.checkpoint(step)
    tmp = _temp_name(paths, final)
    if strategy.is_main_process:
        _fresh_temp(paths, step)
    strategy.wait_for_everyone()  # the temp dir exists before anyone writes into it
    strategy.save_state(model, optimizer, scheduler, tmp)
    strategy.wait_for_everyone()  # every rank's files are on disk
    if strategy.is_main_process:
        topo = {"strategy": strategy.name, "world_size": strategy.num_processes}
        _seal(tmp, final, step, {**topo, **adapter_record(strategy.unwrap(model)), **meta}, recipe_yaml)
        prune(paths, keep_last)
    strategy.wait_for_everyone()
    return final


def _temp_name(paths: RunPaths, final: Path) -> Path:
    # The same name on every rank (no pid): all ranks write into it. A leftover from a crashed
    # attempt is removed before it is reused.
    return paths.checkpoints / f".tmp-{final.name}"


def _fresh_temp(paths: RunPaths, step: int) -> tuple[Path, Path]:
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    final = paths.checkpoint(step)
    tmp = _temp_name(paths, final)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return final, tmp


def _seal(tmp: Path, final: Path, step: int, meta: dict[str, Any], recipe_yaml: str) -> None:
    """RNG, recipe and state.json (every file with size and sha256) into ``tmp``, then rename."""
    torch.save(rng_state(), tmp / RNG)
    (tmp / RECIPE).write_text(recipe_yaml, encoding="utf-8")
    written = sorted(p for p in tmp.rglob("*") if p.is_file())
    files = {str(p.relative_to(tmp)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in written}
    state = {"format": FORMAT, "step": step, "saved_at": time.time(), "files": files, **meta}
    (tmp / STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    for p in [*written, tmp / STATE]:  # data on disk before the rename makes the directory visible
        with p.open("rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def list_checkpoints(paths: RunPaths) -> list[Path]:
    """Complete checkpoints (renamed into place), oldest first. Temp dirs are never listed."""
    if not paths.checkpoints.is_dir():
        return []
    return sorted(p for p in paths.checkpoints.iterdir() if p.is_dir() and p.name.startswith("step-"))


def prune(paths: RunPaths, keep_last: int) -> None:
    for old in list_checkpoints(paths)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in paths.checkpoints.glob(".tmp-*"):  # called after the rename: these are all leftovers
        shutil.rmtree(tmp, ignore_errors=True)


def verify_checkpoint(ckpt: Path) -> dict[str, Any]:
    """state.json of ``ckpt`` after checking every file it lists; CheckpointError names the bad file."""
    state_file = ckpt / STATE
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {ckpt} is incomplete: {state_file} is missing") from None
    except ValueError as exc:
        raise CheckpointError(f"checkpoint file {state_file} is corrupt (not JSON: {exc})") from exc
    for name, want in state.get("files", {}).items():
        f = ckpt / name
        if not f.is_file():
            raise CheckpointError(f"checkpoint file {f} is missing")
        if f.stat().st_size != want["bytes"] or sha256_file(f) != want["sha256"]:
            raise CheckpointError(
                f"checkpoint file {f} is corrupt (size or sha256 differs from {state_file}); "
                f"delete {ckpt} to resume from an earlier checkpoint"
            )
    return state


def load_checkpoint(ckpt: Path, model: torch.nn.Module, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Restore model, optimizer, scheduler and RNG from a verified checkpoint; returns its state."""
    from safetensors.torch import load_model

    state = verify_checkpoint(ckpt)
    try:
        load_model(model, str(ckpt / WEIGHTS))
        optimizer.load_state_dict(torch.load(ckpt / OPTIMIZER, map_location="cpu", weights_only=False))
        scheduler.load_state_dict(torch.load(ckpt / SCHEDULER, weights_only=False))
        set_rng_state(torch.load(ckpt / RNG, weights_only=False))
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"checkpoint {ckpt} does not fit this model/optimizer: {exc}") from exc
    return state


def load_distributed(ckpt: Path, strategy: Any, model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Every rank calls this: verify, check the checkpoint fits the strategy, restore; returns state.json."""
    state = verify_checkpoint(ckpt)
    check_resume(ckpt, state, strategy.unwrap(model))  # the same base and adapter settings
    saved = state.get("strategy", "ddp")
    if saved != strategy.name:
        raise CheckpointError(
            f"checkpoint {ckpt} was saved under train.strategy={saved}; resume it with that strategy "
            f"(this run uses {strategy.name})"
        )
    world = state.get("world_size")
    if saved != "ddp" and world is not None and world != strategy.num_processes:
        raise CheckpointError(
            f"checkpoint {ckpt} holds {saved} shards of {world} processes; resume it with {world} "
            f"processes (this run has {strategy.num_processes})"
        )
    try:
        strategy.load_state(model, optimizer, scheduler, ckpt)
        set_rng_state(torch.load(ckpt / RNG, weights_only=False))
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"checkpoint {ckpt} does not fit this model/optimizer: {exc}") from exc
    return state
