"""RL checkpoints: TRL's own checkpoint directory, adopted into the run's atomic layout.

TRL's trainers (through transformers' Trainer) save everything a resume needs: weights,
optimizer, scheduler, RNG per rank, trainer state with the data position. They write it into a
scratch directory inside the run; adopting it moves the directory under a temporary name next
to the run's checkpoints, adds the resolved recipe and a ``state.json`` listing every file with
its size and sha256, signs it (``state.sig``), and renames it to ``checkpoints/step-XXXXXXXX``,
exactly like a supervised checkpoint. ``verify_checkpoint`` and ``--resume`` therefore treat
both kinds the same way (the trainer reads its files only after they passed), and
``from_pretrained`` and ``Trainer.train(resume_from_checkpoint=...)`` read the step directory
as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from clustertune.fsutil import fsync_all, sha256_file
from clustertune.runs.paths import RunPaths
from clustertune.train import checkpoint as ckpt
from clustertune.runs.sealed import sign_state

SCRATCH = ".trainer"
KIND = "trl"


def scratch_dir(paths: RunPaths) -> Path:
    """Where the trainer writes before a checkpoint is adopted (same filesystem: renames are atomic)."""
    return paths.root / SCRATCH



def adopt_checkpoint(paths: RunPaths, src: Path, step: int, meta: dict[str, Any], recipe_yaml: str, keep_last: int) -> Path:
    """Turn the trainer's ``src`` directory into the complete checkpoint for ``step`` (main process)."""
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    final = paths.checkpoint(step)
    tmp = paths.checkpoints / f".tmp-{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    os.replace(src, tmp)
    (tmp / ckpt.RECIPE).write_text(recipe_yaml, encoding="utf-8")
    files = {str(p.relative_to(tmp)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
             for p in sorted(tmp.rglob("*")) if p.is_file()}
    state = {"format": ckpt.FORMAT, "kind": KIND, "step": step, "saved_at": time.time(), "files": files, **meta}
    state_bytes = (json.dumps(state, indent=2) + "\n").encode("utf-8")
    (tmp / ckpt.STATE).write_bytes(state_bytes)
    sign_state(tmp, state_bytes)  # the trainer's files are pickles: nothing loads them unsigned
    fsync_all([p for p in tmp.rglob("*") if p.is_file()])  # data on disk before the rename makes the directory visible
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    ckpt.prune(paths, keep_last)
    return final
