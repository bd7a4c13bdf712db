"""A single-process run that receives SIGTERM writes a checkpoint at the next step boundary
and ends PREEMPTED, never left RUNNING; SIGUSR2 (the time limit's signal, as SLURM sends it to
a job that runs `clustertune run` itself) ends it TIMEOUT, since nothing requeues it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import TINY_CAUSAL, wait_for_step, with_

RECIPE = with_(TINY_CAUSAL, train={"max_steps": 100000, "log_every": 1, "eval_at_start": False})


@pytest.mark.parametrize(("sig", "state"), [(signal.SIGTERM, "PREEMPTED"), (signal.SIGUSR2, "TIMEOUT")])
def test_a_stop_signal_checkpoints_and_ends_the_run(tmp_path: Path, sig: signal.Signals, state: str) -> None:
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root = tmp_path / "runs"
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "run", str(recipe_file), "--no-progress", "--runs-root", str(root)],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not root.is_dir() or not any((p / "metrics.jsonl").is_file() for p in root.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended or never started training"
            time.sleep(0.1)
        (run_dir,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
        seen = wait_for_step(run_dir / "metrics.jsonl", 3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == state, info
    assert sig.name in info["attempts"][-1]["reason"] and "checkpoint written" in info["reason"]
    (ckpt,) = (run_dir / "checkpoints").glob("step-*")
    assert int(ckpt.name.split("-")[1]) >= seen and (ckpt / "state.json").is_file()
    assert not (run_dir / "model").exists()
