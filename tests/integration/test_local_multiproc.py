"""Several training processes on this host through torchrun (gloo on CPU)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clustertune import api
from clustertune.recipe.load import load_recipe
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run
from tests.helpers import TINY_CAUSAL, cli, read_jsonl, wait_for_step, with_

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}


def tiny(**sections):
    base = with_(TINY_CAUSAL, model={"config_overrides": {**TINY_CAUSAL["model"]["config_overrides"], **NO_DROPOUT}})
    return load_recipe(with_(base, **sections))


def train_losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"}


@pytest.mark.smoke  # one end-to-end check of this backend in `scripts/test.sh --fast`
def test_two_ranks_match_one_rank_with_twice_the_batch(runs_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from clustertune.api import run as api_run

    steps = {"max_steps": 20, "log_every": 1, "eval_at_start": False}
    one = api_run(tiny(train={**steps, "batch_size": 8}), show_progress=False)
    capsys.readouterr()
    two = api.run(tiny(train={**steps, "batch_size": 4, "eval_every": 10, "save_every": 10},
                      launch={"procs_per_node": 2}))
    shown = capsys.readouterr().err.splitlines()
    assert one.state is RunState.COMPLETED
    assert two.state is RunState.COMPLETED, two.info.reason
    a, b = train_losses(one.paths.root), train_losses(two.paths.root)
    assert sorted(a) == sorted(b) == list(range(1, 21))
    worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
    assert worst <= 1e-4, f"2 ranks x 4 vs 1 rank x 8: largest relative loss difference {worst:.2e}"
    # Every rank logged to the run directory; rank 0 alone wrote metrics (one row per step).
    logs = two.paths.logs_dir
    assert {"rank-0.log", "rank-1.log", "run.log", "launcher.log"} <= {p.name for p in logs.iterdir()}
    assert "rank 1/2" in (logs / "rank-1.log").read_text()
    # What the person who started it saw (not a terminal): rank 0's lines as they came, one per
    # log step, the evaluations and checkpoints among them, without the log records' prefixes.
    steps_shown = [ln for ln in shown if ln.startswith("step ")]
    assert [ln.split()[1] for ln in steps_shown] == [f"{s}/20" for s in range(1, 21)], shown
    assert "eval@10" in steps_shown[10] and " eta " in steps_shown[-1], shown
    assert any(ln.startswith("eval @ step 10") for ln in shown), shown
    assert any(ln.startswith("checkpoint step-00000010 written") for ln in shown), shown
    # The run's own log has the same lines (what `clustertune logs --follow` reads), with their times.
    run_log = (logs / "run.log").read_text()
    assert run_log.count(" rank0 INFO step ") == 20 and "rank0 INFO checkpoint step-00000010" in run_log, run_log


def test_resume_at_another_world_size_continues_from_the_same_sample(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tiny(train={"max_steps": 8, "log_every": 2, "save_every": 4, "batch_size": 4, "eval_at_start": False},
                  launch={"procs_per_node": 2})
    monkeypatch.setenv("CLUSTERTUNE_FAULT_KILL_AT_STEP", "6")
    first = api.run(recipe)
    assert first.state is RunState.FAILED
    assert "torchrun exited" in first.info.reason
    monkeypatch.delenv("CLUSTERTUNE_FAULT_KILL_AT_STEP")

    out = cli("run", "--resume", first.id, "launch.procs_per_node=1")
    assert out.returncode == 0, out.stdout + out.stderr
    resumed = get_run(first.id)
    assert resumed.state is RunState.COMPLETED, resumed.info.reason
    assert resumed.paths.recipe.read_text().count("procs_per_node: 1") == 1
    assert resumed.attempts[-1].resumed_from == "step-00000004"
    rows = [r for r in read_jsonl(resumed.paths.metrics) if r["kind"] == "train"]
    assert [r["step"] for r in rows] == [2, 4, 6, 8]  # the lost attempt's step-6 row was dropped
    seen = {r["step"]: r["samples_seen"] for r in rows}
    # Steps 1-4 at 2 ranks x 4 samples, then 1 rank x 4: continued from sample 32, nothing replayed.
    assert seen[4] == 32 and seen[6] == 40 and seen[8] == 48


def test_more_processes_than_cores_is_refused_before_anything_starts(runs_root: Path) -> None:
    import os

    from clustertune.errors import LaunchError

    n = (os.cpu_count() or 1) + 1
    with pytest.raises(LaunchError, match=f"procs_per_node={n}.*CPU core"):
        api.run(tiny(launch={"procs_per_node": n}))
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_cancel_of_a_local_multi_process_run_stops_every_rank(runs_root: Path, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys
    import time

    import yaml

    from clustertune.runs.store import list_runs

    recipe = tmp_path / "long.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 100000, "log_every": 5, "eval_at_start": False},
                                           launch={"procs_per_node": 2})))
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "run", str(recipe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            runs = list_runs(runs_root)
            if runs and runs[0].paths.metrics.is_file() and runs[0].paths.metrics.read_text().strip():
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the ranks never logged a step")
        run_id = runs[0].id
        out = cli("cancel", run_id)
        assert out.returncode == 0, out.stderr
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    info = json.loads((runs_root / run_id / "run.json").read_text())
    assert info["state"] == "CANCELLED"
    pids = subprocess.run(["pgrep", "-f", f"clustertune.train.entry {runs_root / run_id}"], capture_output=True, text=True)
    assert pids.stdout.strip() == ""  # no rank left behind


def test_sigterm_to_the_launcher_stops_every_rank_with_a_checkpoint(runs_root: Path, tmp_path: Path) -> None:
    """The ranks run in a session of their own: a SIGTERM to `clustertune run` must reach them as a
    stop request (a checkpoint, PREEMPTED), not leave them training as orphans."""
    import json
    import signal
    import subprocess
    import sys

    import yaml

    recipe = tmp_path / "long.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 100000, "log_every": 1, "eval_at_start": False},
                                           launch={"procs_per_node": 2})))
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "run", str(recipe), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not [d for d in runs_root.glob("*") if (d / "metrics.jsonl").is_file()]:
            assert proc.poll() is None and time.monotonic() < deadline, "the ranks never started training"
            time.sleep(0.2)
        (run_dir,) = [d for d in runs_root.iterdir() if (d / "run.json").is_file()]
        seen = wait_for_step(run_dir / "metrics.jsonl", 2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    # With --no-progress the person still sees rank 0's phases (no step lines), as in-process.
    shown = err.splitlines()
    assert "rank 0/2 on node 0" in shown and any(ln.startswith("model: ") for ln in shown), err
    assert not any(ln.startswith("step ") for ln in shown), err
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "PREEMPTED" and "SIGTERM" in info["reason"], info
    (ckpt,) = (run_dir / "checkpoints").glob("step-*")
    assert int(ckpt.name.split("-")[1]) >= seen and (ckpt / "state.json").is_file()
    pids = subprocess.run(["pgrep", "-f", f"clustertune.train.entry {run_dir}"], capture_output=True, text=True)
    assert pids.stdout.strip() == ""  # no rank left behind


def test_max_restarts_restarts_failed_workers_from_the_last_checkpoint(runs_root: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.train.loop import KILL_AT_STEP_ENV, KILL_ONCE_ENV

    train = {"max_steps": 8, "log_every": 1, "save_every": 4, "batch_size": 4, "eval_at_start": False}
    steady = api.run(tiny(train=train, launch={"procs_per_node": 2}))
    assert steady.state is RunState.COMPLETED, steady.info.reason

    # One worker is SIGKILLed after step 6; torchrun's agent restarts both, and they continue from
    # the step-4 checkpoint inside the same launch, with no `--resume`.
    monkeypatch.setenv(KILL_AT_STEP_ENV, "6")
    monkeypatch.setenv(KILL_ONCE_ENV, str(tmp_path / "killed-once"))
    run = api.run(tiny(train=train, launch={"procs_per_node": 2, "max_restarts": 1}))
    assert (tmp_path / "killed-once").exists()  # the fault did fire
    assert run.state is RunState.COMPLETED, run.info.reason
    # Whichever rank died, the restart continued from the checkpoint; if the survivor was rank 0
    # it recorded its own failure first (an ended attempt), and the restart opened another.
    assert run.attempts[-1].resumed_from == "step-00000004" and len(run.attempts) in (1, 2)
    assert all(a.ended_at and a.reason for a in run.attempts[:-1])
    # torchrun started the ranks again, and they said where they resumed from (in the run's log too).
    launcher = (run.paths.logs_dir / "launcher.log").read_text()
    assert launcher.count("rank 0/2 on node 0") == 2 and "rank 0/2 on node 0, resuming from step-00000004" in launcher
    assert "rank 0/2 on node 0, resuming from step-00000004" in run.paths.log.read_text()
    steps = [r["step"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert steps == list(range(1, 9))  # the killed workers' rows for steps 5-6 were dropped, then redone
    got, want = train_losses(run.paths.root), train_losses(steady.paths.root)
    assert max(abs(got[s] - want[s]) / abs(want[s]) for s in want) <= 1e-6
