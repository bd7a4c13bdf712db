"""Self-describing, atomic checkpoints.

A checkpoint is a directory ``checkpoints/step-XXXXXXXX/`` holding the weights (safetensors),
optimizer, scheduler and RNG states, the data position, the resolved recipe and a
``state.json`` listing every file with its size and sha256. It is written under a temporary
name and renamed into place, so a directory with that name is complete; loading checks every
file against ``state.json`` and names the one that does not match.

Checkpoints travel between hosts, so nothing in one may run code when it is loaded: the files
written here (optimizer, scheduler, scaler and RNG states) hold only tensors and plain values
and are read with ``torch.load(weights_only=True)``; one that holds anything else is refused.
The files libraries pickle by design (DCP metadata under FSDP, DeepSpeed's state files) are
covered by the signature: ``state.sig`` signs state.json with the user's checkpoint key, and no
file is opened before the signature and its digest are checked (see ``sealed``).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clustertune.fsutil import free_mb, fsync_all, fsync_file, is_no_space, sha256_file
from clustertune.errors import CheckpointError, DiskFullError
from clustertune.models.adapters import adapter_record, check_resume
from clustertune.runs.paths import RunPaths, checkpoint_step
from clustertune.train import faults
# Listing and signatures live in sealed (no torch: launchers use them); callers reach them here too.
from clustertune.runs.sealed import STATE, list_checkpoints, sign_state, verified_state

log = logging.getLogger("clustertune")

FORMAT = 1
OPTIMIZER = "optimizer.pt"
SCHEDULER = "scheduler.pt"
RNG = "rng.pt"  # written by single-process runs before each rank saved its own (rng-N.pt); still read
RECIPE = "recipe.yaml"
SCALER = "scaler.pt"
# The pickled files whose format is ours: tensors and plain values only.
TENSOR_FILES = (OPTIMIZER, SCHEDULER, SCALER, RNG, "rng-*.pt")


def load_tensors(path: Path, mmap: bool = False) -> Any:
    """``path`` read with ``torch.load(weights_only=True)``: tensors and plain containers only.
    A file that needs anything else (a class, a function, a ``__reduce__``) is refused before
    any of it runs."""
    import pickle

    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"checkpoint file {path} holds more than tensors and plain values, so loading it could run "
            f"code; it was not loaded ({first}). Delete {path.parent} to resume from an earlier checkpoint"
        ) from None


def check_tensor_files(ckpt: Path, names: list[str]) -> None:
    """Every file of ours among ``names`` opens under ``weights_only=True`` (memory-mapped: the
    pickle is checked, the tensor data is not read)."""
    for name in names:
        path = ckpt / name
        if not any(path.match(pattern) for pattern in TENSOR_FILES) or "/" in name:
            continue
        try:
            load_tensors(path, mmap=True)
        except RuntimeError:  # not torch's zip format (cannot be mapped): read it whole, as safely
            load_tensors(path)


def rng_state() -> dict[str, Any]:
    """This process's generators as tensors and plain values; on a GPU only its own device's
    (each rank saves its own)."""
    np_state = np.random.get_state(legacy=False)
    state = {
        "python": random.getstate(),
        "numpy": {"bit_generator": np_state["bit_generator"],
                  "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
                  "pos": int(np_state["state"]["pos"]),
                  "has_gauss": int(np_state["has_gauss"]), "gauss": float(np_state["gauss"])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state({"bit_generator": n["bit_generator"],
                         "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
                         "has_gauss": n["has_gauss"], "gauss": n["gauss"]})
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if isinstance(cuda, (list, tuple)):  # older checkpoints: every visible device's state
            here = torch.cuda.current_device()
            cuda = cuda[here] if here < len(cuda) else None
        if cuda is not None:
            torch.cuda.set_rng_state(cuda)


def rank_rng_name(rank: int) -> str:
    return f"rng-{rank}.pt"


def rng_file(ckpt: Path, rank: int) -> Path:
    """The RNG state rank ``rank`` resumes with: its own, else rank 0's (a resume on more ranks
    than saved; those start from rank 0's generators), else the single-process ``rng.pt``."""
    for name in (rank_rng_name(rank), rank_rng_name(0), RNG):
        if (ckpt / name).is_file():
            return ckpt / name
    raise CheckpointError(f"checkpoint {ckpt} holds no RNG state ({RNG} or {rank_rng_name(0)})")


@contextmanager
def out_of_space_is_typed(paths: RunPaths, step: int, tmp: Path) -> Iterator[None]:
    """A checkpoint write that runs out of space removes what it wrote (so the run's directory
    can still record how it ended) and fails with one message; earlier checkpoints stay."""
    try:
        yield
    except Exception as exc:
        # torch.save's zip writer reports a short write as a RuntimeError without the OSError:
        # a device with (almost) nothing left free explains it as well.
        left = free_mb(paths.checkpoints)
        if not is_no_space(exc) and not (left is not None and left < 1.0):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        kept = [p.name for p in list_checkpoints(paths)]
        free = free_mb(paths.checkpoints)
        raise DiskFullError(
            f"no space left on the device of {paths.checkpoints} writing the checkpoint of step {step}"
            + (f" ({free:.1f} MB free now the partial write is removed)" if free is not None else "")
            + (f"; the earlier checkpoints are intact ({', '.join(kept)})" if kept else "")
            + f"; free space there (or lower train.keep_last), then `clustertune run --resume {paths.run_id}`"
        ) from exc


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
    can see is complete.

    Hosts that share no filesystem (SSH hosts) each write into a temp directory of their own:
    rank 0's host seals the checkpoint, listing every host's files with their checksums, and each
    other host keeps, under the same step name, only the files rank 0's host lacks (its ranks'
    shards and generators). The launcher brings the parts together before the run resumes."""
    final = paths.checkpoint(step)
    tmp = _temp_name(paths, final)
    nonce = _save_nonce(strategy)
    if strategy.is_main_process:
        _fresh_temp(paths, step)
    strategy.wait_for_everyone()  # the temp dir exists before anyone writes into it
    with out_of_space_is_typed(paths, step, tmp):  # this rank fails with the message; its launcher stops the rest
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / VIEW.format(nonce=nonce, rank=strategy.process_index)).touch()  # who sees this directory
        strategy.save_state(model, optimizer, scheduler, tmp)
        torch.save(rng_state(), tmp / rank_rng_name(strategy.process_index))  # dropout differs per rank
    faults.point("checkpoint", step, strategy.process_index)  # files written, nothing sealed
    strategy.wait_for_everyone()  # every rank's files are on disk
    # The ranks that see this directory: all of them on one filesystem; on hosts that share
    # none, the ranks of this host.
    peers = sorted(int(m.name.rsplit("-", 1)[1]) for m in tmp.glob(VIEW.format(nonce=nonce, rank="*")))
    # Each rank hashes and fsyncs its share of the files (hundreds of GB of shards would keep
    # one rank busy past the collective timeout while the others wait in the barrier).
    hash_share(tmp, peers.index(strategy.process_index), len(peers), strategy.process_index)
    strategy.wait_for_everyone()
    if len(peers) < strategy.num_processes:
        _seal_across_hosts(paths, tmp, final, step, strategy, peers[0] == strategy.process_index,
                           meta, recipe_yaml, keep_last, model)
    elif strategy.is_main_process:
        _drop_markers(tmp)
        topo = {"strategy": strategy.name, "world_size": strategy.num_processes}
        _seal(tmp, final, step, {**topo, **adapter_record(strategy.unwrap(model)), **meta}, recipe_yaml,
              hashed=collect_shares(tmp))
        prune(paths, keep_last)
    strategy.wait_for_everyone()
    return final


# A rank's mark in the temp directory of a save (the nonce tells this save's marks from a dead
# attempt's): the ranks whose marks a rank sees share its filesystem.
VIEW = ".view-{nonce}-{rank}"


def _save_nonce(strategy: Any) -> str:
    """One random word for this save, the same on every rank (rank 0 draws it)."""
    if strategy.num_processes == 1:
        return "one"
    import secrets

    import torch.distributed as dist

    box = [secrets.token_hex(6) if strategy.is_main_process else ""]
    dist.broadcast_object_list(box, src=0)
    return str(box[0])


def _drop_markers(tmp: Path) -> None:
    for m in tmp.glob(".view-*"):
        m.unlink(missing_ok=True)


def _seal_across_hosts(paths: RunPaths, tmp: Path, final: Path, step: int, strategy: Any, leader: bool,
                       meta: dict[str, Any], recipe_yaml: str, keep_last: int, model: Any) -> None:
    """The seal when hosts share no filesystem: each host's first rank hands in its host's
    checksums; rank 0 seals all of them into state.json; the other hosts keep their part."""
    import torch.distributed as dist

    here = collect_shares(tmp) if leader else {}
    views: list[dict[str, Any] | None] = [None] * strategy.num_processes
    dist.all_gather_object(views, here)
    main_files = views[0] or {}  # rank 0 leads its host's ranks
    if strategy.is_main_process:
        merged = dict(main_files)
        for v in views[1:]:
            for name, digest in (v or {}).items():
                merged.setdefault(name, digest)
        _drop_markers(tmp)
        topo = {"strategy": strategy.name, "world_size": strategy.num_processes}
        _seal(tmp, final, step, {**topo, **adapter_record(strategy.unwrap(model)), **meta}, recipe_yaml, hashed=merged)
        prune(paths, keep_last)
    elif leader:
        for name in main_files:  # rank 0's host has these: only this host's own part stays
            (tmp / name).unlink(missing_ok=True)
        _drop_markers(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in paths.checkpoint_dirs()[:-keep_last]:  # parts without state.json: pruned by name
            _remove(old)


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


SHARE = ".digests-{rank}.json"  # one rank's hashed share, merged into state.json by the seal


def _files(tmp: Path) -> list[Path]:
    return sorted(p for p in tmp.rglob("*") if p.is_file() and not p.name.startswith((".digests-", ".view-")))


def split_shares(sizes: dict[str, int], world: int) -> list[list[str]]:
    """Files dealt to ranks, largest first to the least loaded, so each hashes about 1/world of
    the bytes. A pure function of the listing: every rank computes the same split."""
    shares: list[list[str]] = [[] for _ in range(world)]
    load = [0] * world
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        r = load.index(min(load))
        shares[r].append(name)
        load[r] += sizes[name]
    return shares


def hash_share(tmp: Path, index: int, peers: int, rank: int | None = None) -> None:
    """Size, sha256 and fsync of share ``index`` of ``peers`` of the files in ``tmp`` (the ranks
    that see it), written beside them as ``rank``'s share (default: ``index``)."""
    sizes = {str(p.relative_to(tmp)): p.stat().st_size for p in _files(tmp)}
    digests = {}
    for name in split_shares(sizes, peers)[index]:
        f = tmp / name
        digests[name] = {"bytes": sizes[name], "sha256": sha256_file(f)}
        fsync_file(f)
    (tmp / SHARE.format(rank=index if rank is None else rank)).write_text(json.dumps(digests), encoding="utf-8")


def collect_shares(tmp: Path) -> dict[str, dict[str, Any]]:
    """Every rank's share merged (and the share files removed)."""
    merged: dict[str, dict[str, Any]] = {}
    for f in sorted(tmp.glob(".digests-*.json")):
        merged.update(json.loads(f.read_text(encoding="utf-8")))
        f.unlink()
    return merged


def _seal(tmp: Path, final: Path, step: int, meta: dict[str, Any], recipe_yaml: str,
          hashed: dict[str, dict[str, Any]]) -> None:
    """Recipe and state.json (every file with size and sha256) into ``tmp``, then rename.
    ``hashed``: the files the ranks hashed and fsynced already (the rest are hashed here)."""
    (tmp / RECIPE).write_text(recipe_yaml, encoding="utf-8")
    written = [p for p in _files(tmp) if str(p.relative_to(tmp)) not in hashed]
    files = dict(hashed)
    files.update({str(p.relative_to(tmp)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in written})
    files = dict(sorted(files.items()))
    state = {"format": FORMAT, "step": step, "saved_at": time.time(), "files": files, **meta}
    state_bytes = (json.dumps(state, indent=2) + "\n").encode("utf-8")
    (tmp / STATE).write_bytes(state_bytes)
    signature = sign_state(tmp, state_bytes)  # covers every file through its sha256
    fsync_all([*written, tmp / STATE, signature])  # data on disk before the rename makes the directory visible
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def _remove(d: Path) -> None:
    """Rename out of the ``step-`` names first, so a removal cut short leaves nothing listed."""
    gone = d.with_name(f".pruned-{d.name}-{os.getpid()}")
    try:
        os.replace(d, gone)
    except FileNotFoundError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def prune(paths: RunPaths, keep_last: int) -> None:
    for old in list_checkpoints(paths)[:-keep_last]:
        _remove(old)
    for tmp in paths.checkpoints.glob(".tmp-*"):  # called after the rename: these are all leftovers
        shutil.rmtree(tmp, ignore_errors=True)


def clean_stale(paths: RunPaths) -> list[str]:
    """Remove what killed attempts left (temporary checkpoint directories, half-removed ones,
    step directories without state.json); call only when no attempt of the run is running,
    at the start of a new one. Returns the names removed."""
    if not paths.checkpoints.is_dir():
        return []
    complete = set(list_checkpoints(paths))
    stale = [p for p in paths.checkpoints.iterdir() if p.is_dir() and p not in complete
             and (p.name.startswith((".tmp-", ".pruned-")) or checkpoint_step(p.name) is not None)]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return sorted(p.name for p in stale)


def verify_checkpoint(ckpt: Path, key: bytes | None = None) -> dict[str, Any]:
    """state.json of ``ckpt`` after checking its signature and then every file it lists, before
    any of them is opened; CheckpointError names the checkpoint or the bad file."""
    state = verified_state(ckpt, key)
    if state.get("kind") != "trl":  # an RL checkpoint is the trainer's own directory
        check_tensor_files(ckpt, list(state.get("files", {})))
    return state


def announce_load(ckpt: Path, into: str) -> None:
    """The line before a resume reads ``ckpt``: a large checkpoint takes a while to read."""
    size = sum(p.stat().st_size for p in ckpt.rglob("*") if p.is_file())
    log.info("resuming: loading %s (%.1f MB) into %s", ckpt.name, size / 1e6, into)


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
    if strategy.is_main_process:
        announce_load(ckpt, "the model and optimizer")
    try:
        strategy.load_state(model, optimizer, scheduler, ckpt)
        set_rng_state(load_tensors(rng_file(ckpt, strategy.process_index)))
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise CheckpointError(f"checkpoint {ckpt} does not fit this model/optimizer: {exc}") from exc
    return state
