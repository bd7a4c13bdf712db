"""`clustertune launch -- COMMAND` on this host: a plain PyTorch DDP script with its own
checkpointing on 2 ranks, cancelled part-way (it saves on SIGTERM) and resumed as a new attempt
to the same final loss as an uninterrupted run; a command the node does not have; runner none."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import cli
from tests.integration.script_fixtures import DDP_SCRIPT


def _only_run(runs_root: Path) -> Path:
    (run,) = [d for d in runs_root.iterdir() if (d / "run.json").is_file()]
    return run


def _info(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


def test_a_ddp_script_cancelled_part_way_resumes_to_the_uninterrupted_loss(tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "train.py").write_text(DDP_SCRIPT)
    straight = tmp_path / "straight"
    out = cli("launch", "launch.procs_per_node=2", "--runs-root", str(straight), "--", sys.executable, "train.py", "30",
              cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    want = json.loads((_only_run(straight) / "final.json").read_text())["loss"]

    exe = Path(sys.executable).with_name("clustertune")
    first = subprocess.Popen([str(exe), "launch", "launch.procs_per_node=2", "launch.stop_grace_seconds=20", "--",
                              sys.executable, "train.py", "30"], cwd=tmp_path, env={**__import__("os").environ, "STEP_PAUSE": "0.1"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = list(runs_root.glob("*/progress")) if runs_root.is_dir() else []
        if runs and runs[0].read_text().strip() and int(runs[0].read_text()) >= 3:
            break
        time.sleep(0.2)
    run = _only_run(runs_root)
    status = cli("status", run.name)
    assert status.returncode == 0 and "RUNNING" in status.stdout, status.stdout + status.stderr
    assert cli("cancel", run.name).returncode == 0
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 130, stdout + stderr  # the launching process was interrupted by the cancel
    assert [(a["state"], a["exit_code"]) for a in _info(run)["attempts"]] == [("CANCELLED", 0)]
    saved_at = int((run / "progress").read_text())
    assert 3 <= saved_at < 30

    again = cli("launch", "--resume", run.name, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    final = json.loads((run / "final.json").read_text())
    assert final == {"loss": want, "attempt": 2}
    info = _info(run)
    assert info["state"] == "COMPLETED" and info["task"] == "command"
    assert [(a["state"], a["exit_code"]) for a in info["attempts"]] == [("CANCELLED", 0), ("COMPLETED", 0)]
    assert json.loads((run / "command.json").read_text()) == [sys.executable, "train.py", "30"]
    assert "procs_per_node: 2" in (run / "launch.yaml").read_text()
    rank1 = (run / "logs" / "rank-1.log").read_text()
    assert "rank 1/2 attempt 1 starts at step 0" in rank1 and f"attempt 2 starts at step {saved_at}" in rank1
    logs = cli("logs", run.name)
    assert "rank 0 saved at step" in logs.stdout and "rank 0 done" in logs.stdout
    listing = cli("runs")
    assert run.name in listing.stdout and "COMPLETED" in listing.stdout


def test_a_command_the_node_does_not_have_fails_with_its_message(tmp_path: Path, runs_root: Path) -> None:
    out = cli("launch", "--", "no-such-command-here", "--flag", cwd=tmp_path)
    assert out.returncode == 1
    info = _info(_only_run(runs_root))
    assert info["state"] == "FAILED" and info["attempts"][0]["exit_code"] == 127
    assert info["reason"].startswith("clustertune: cannot start 'no-such-command-here' on ")


def test_runner_none_runs_the_command_once_with_the_placeholders_filled(tmp_path: Path, runs_root: Path) -> None:
    code = "import os, sys; print('args', sys.argv[1:], 'rank', os.environ.get('RANK'))"
    out = cli("launch", "launch.runner=none", "--", sys.executable, "-c", code, "{node_rank}/{nnodes}", "{master_addr}",
              "{unknown}", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    log = (_only_run(runs_root) / "logs" / "node-0.log").read_text()
    assert "args ['0/1', '127.0.0.1', '{unknown}'] rank None" in log
