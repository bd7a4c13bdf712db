"""A finite learning rate that makes training diverge stops the run FAILED, naming the step and
the likely cause, and no checkpoint of the diverged state is ever sealed."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from tests.helpers import TINY_CAUSAL, cli, with_

# Finite, but far past anything a model survives: the weights overflow within a few steps.
RECIPE = with_(TINY_CAUSAL, train={"lr": 1e30, "max_steps": 12, "save_every": 1, "log_every": 6,
                                   "eval_at_start": False, "warmup_steps": 0, "max_grad_norm": None})


def test_a_diverging_run_fails_and_seals_no_non_finite_state(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root = tmp_path / "runs"
    out = cli("run", str(recipe_file), "--no-progress", "--runs-root", str(root))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "training diverged at step" in out.stderr and "train.lr=1e+30" in out.stderr
    assert "Traceback" not in out.stderr
    (run_dir,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "FAILED" and "diverged at step" in info["attempts"][-1]["reason"]
    step = int(info["attempts"][-1]["reason"].split("diverged at step ")[1].split()[0])
    assert step < 12
    sealed = sorted((run_dir / "checkpoints").glob("step-*")) if (run_dir / "checkpoints").is_dir() else []
    assert all(int(c.name.split("-")[1]) < step for c in sealed)
    for c in sealed:
        assert all(torch.isfinite(w).all() for w in load_file(str(c / "model.safetensors")).values()), c
    assert not list((run_dir / "checkpoints").glob(".tmp-*")) if (run_dir / "checkpoints").is_dir() else True
    assert not (run_dir / "model").exists()

    # A checkpoint write killed half-way is cleaned at the next start of the same run.
    stale = run_dir / "checkpoints" / ".tmp-step-00000099"
    stale.mkdir(parents=True)
    again = cli("run", "--resume", run_dir.name, "--no-progress", "--runs-root", str(root))
    assert again.returncode == 2 and "training diverged at step" in again.stderr, again.stderr
    assert not stale.exists()
