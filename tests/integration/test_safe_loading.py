"""Nothing in a checkpoint runs code when it is loaded: a ``__reduce__`` payload planted in a
real checkpoint's optimizer state (with state.json's checksums recomputed, as anyone who can
write the file can) is refused by ``--resume`` with a typed error, and never runs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
import yaml

from clustertune.train.loop import KILL_AT_STEP_ENV
from tests.helpers import TINY_CAUSAL, cli, with_

RECIPE = with_(TINY_CAUSAL, train={"max_steps": 4, "save_every": 2, "log_every": 2, "eval_at_start": False})


class Payload:
    """Creates ``marker`` when unpickled by a loader that runs what a pickle asks for."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def plant(ckpt: Path, name: str, marker: Path) -> Path:
    """Replace ``ckpt/name`` with a pickle that carries a payload, and fix state.json to match."""
    target = ckpt / name
    good = torch.load(target, map_location="cpu", weights_only=True)
    torch.save({**good, "extra": Payload(marker)}, target)
    state_file = ckpt / "state.json"
    state = json.loads(state_file.read_text())
    data = target.read_bytes()
    state["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    return target


def test_resume_refuses_a_checkpoint_whose_optimizer_state_carries_code(tmp_path: Path) -> None:
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root = tmp_path / "runs"
    killed = cli("run", str(recipe_file), "--no-progress", "--runs-root", str(root), env={KILL_AT_STEP_ENV: "3"})
    assert killed.returncode != 0
    (run_dir,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
    (last,) = (run_dir / "checkpoints").glob("step-*")
    assert cli("status", run_dir.name, "--runs-root", str(root)).returncode == 0  # the dead pid is noticed

    marker = tmp_path / "payload-ran"
    planted = plant(last, "optimizer.pt", marker)
    before = (run_dir / "run.json").read_bytes()
    out = cli("run", "--resume", run_dir.name, "--no-progress", "--runs-root", str(root))
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(planted) in out.stderr and "could run code" in out.stderr and "Traceback" not in out.stderr
    assert not marker.exists()
    assert (run_dir / "run.json").read_bytes() == before  # refused before anything changed

    # The payload is real: the loader that used to read these files runs it.
    torch.load(planted, map_location="cpu", weights_only=False)
    assert marker.is_dir()
