"""Ctrl-C and `clustertune cancel` of a run training in its own process: the run ends CANCELLED
with the reason, and the terminal says which checkpoint is kept and how to continue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.helpers import TINY_CAUSAL, as_from_a_terminal, cli, wait_for_step, with_

RECIPE = with_(TINY_CAUSAL, train={"max_steps": 100000, "log_every": 1, "save_every": 2, "eval_at_start": False})


def start(root: Path, *args: str) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("clustertune")
    return subprocess.Popen([str(exe), "run", *args, "--no-progress", "--runs-root", str(root)], env=dict(os.environ),
                            preexec_fn=as_from_a_terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kept(run_dir: Path) -> str:
    return sorted(p.name for p in (run_dir / "checkpoints").glob("step-*") if (p / "state.json").is_file())[-1]


def test_ctrl_c_and_cancel_name_the_kept_checkpoint_and_the_resume_command(tmp_path: Path) -> None:
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root = tmp_path / "runs"
    proc = start(root, str(recipe_file))
    try:
        deadline = time.monotonic() + 180
        while not root.is_dir() or not any((p / "metrics.jsonl").is_file() for p in root.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.1)
        (run_dir,) = list(root.iterdir())
        seen = wait_for_step(run_dir / "metrics.jsonl", 3)  # step-2 is sealed before step 3 starts
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_id = run_dir.name
    assert proc.returncode == 130, err[-3000:]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "CANCELLED" and info["reason"] == "interrupted (Ctrl-C / SIGINT)", info
    assert (f"run {run_id} interrupted: checkpoint {kept(run_dir)} is kept (steps after it are lost); "
            f"continue with `clustertune run --resume {run_id}`") in err, err[-3000:]

    # The command it printed continues the run; `clustertune cancel` from another process stops it.
    proc = start(root, "--resume", run_id)
    try:
        wait_for_step(run_dir / "metrics.jsonl", seen + 3)
        cancel = cli("cancel", run_id, "--runs-root", str(root))
        assert cancel.returncode == 0 and cancel.stdout.strip() == f"{run_id} CANCELLED", cancel.stdout + cancel.stderr
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "CANCELLED" and info["reason"] == "cancelled by user (`clustertune cancel`)", info
    assert [a["reason"] for a in info["attempts"]] == ["interrupted (Ctrl-C / SIGINT)", "cancelled by user (`clustertune cancel`)"]
    assert f"run {run_id} cancelled: checkpoint {kept(run_dir)} is kept" in err, err[-3000:]
