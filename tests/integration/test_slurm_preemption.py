"""Stop requests on a real SLURM cluster: the ranks checkpoint on an agreed step, the job
requeues itself and resumes, and the result equals an uninterrupted run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clustertune.identity import derived_checkpoint_key
from clustertune.launch import job_for
from clustertune import api
from clustertune.recipe.load import load_recipe
from clustertune.runs.state import RunState
from tests.helpers import TINY_CAUSAL, read_jsonl, tree_snapshot, wait_for_step, with_

pytestmark = pytest.mark.usefixtures("slurm_cluster")

TRAIN = {"max_steps": 160, "log_every": 4, "eval_at_start": False}


def test_usr2_checkpoints_requeues_and_resumes_to_the_same_loss(runs_root: Path) -> None:
    from clustertune.api import run as api_run

    recipe = load_recipe(with_(TINY_CAUSAL, train=TRAIN, launch={"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1}))
    run = api.run(recipe)
    job = job_for(run)
    wait_for_step(run.paths.metrics, 8)
    subprocess.run(["scancel", "--signal=USR2", "--batch", job.job_id], check=True, timeout=30)
    state = job.wait(timeout=400)
    run.reload()
    assert state is RunState.COMPLETED, f"{run.info.reason}\n{job.logs()}"

    first, second = run.attempts[0], run.attempts[-1]
    assert first.state == "PREEMPTED" and "USR2" in first.reason
    stop_step = int(first.reason.split("at step ")[1].split(";")[0])
    # One process stops at the next step boundary (no agreement needed), not only at a log step.
    assert 0 < stop_step < TRAIN["max_steps"]
    assert second.resumed_from == f"step-{stop_step:08d}" and second.job_id == first.job_id
    batch_log = job.logs()
    assert "received SIGUSR2" in batch_log and "requeue:" in batch_log and "restart 1" in batch_log
    # The requeued job checked the checkpoint's signature with the key the job's environment
    # carried; no file of the run (the batch script included) holds that key.
    key = derived_checkpoint_key().hex().encode()
    assert (run.paths.checkpoint(stop_step) / "state.sig").is_file()
    assert not [name for name, data in tree_snapshot(run.paths.root).items() if key in data]

    # No step lost or repeated, and the same numbers as a run that was never interrupted.
    rows = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert [r["step"] for r in rows] == list(range(4, 161, 4))
    plain = api_run(with_(TINY_CAUSAL, train=TRAIN), show_progress=False)
    ref = [r for r in read_jsonl(plain.paths.metrics) if r["kind"] == "train"]
    for got, want in zip(rows, ref, strict=True):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5), got["step"]
    evals = lambda p: [r["eval_loss"] for r in read_jsonl(p) if r["kind"] == "eval"][-1]  # noqa: E731
    assert evals(run.paths.metrics) == pytest.approx(evals(plain.paths.metrics), rel=1e-5)


def test_time_limit_signal_stops_with_a_checkpoint_and_no_requeue_left_is_timeout(runs_root: Path) -> None:
    # --time=2 with B:USR2@90: SLURM sends the signal some 30-90 s before the limit.
    launch_ = {"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1, "time": "2", "signal": "B:USR2@90",
               "max_requeues": 0}
    run = api.run(load_recipe(with_(TINY_CAUSAL, train={"max_steps": 100000, "log_every": 4, "eval_at_start": False},
                                   launch=launch_)))
    job = job_for(run)
    state = job.wait(timeout=200)
    run.reload()
    assert state is RunState.TIMEOUT, f"{run.info.reason}\n{job.logs()}"
    assert "SIGUSR2" in run.info.reason
    step = int(run.info.reason.split("at step ")[1].split(";")[0])
    assert (run.paths.checkpoint(step) / "state.json").is_file()
    assert "not requeued" in job.logs() and len(run.attempts) == 1


def test_sigterm_stops_with_a_checkpoint_and_resume_submits_a_new_job(runs_root: Path) -> None:
    from tests.helpers import cli

    recipe = load_recipe(with_(TINY_CAUSAL, train={**TRAIN, "max_steps": 240},
                               launch={"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1}))
    run = api.run(recipe)
    job = job_for(run)
    wait_for_step(run.paths.metrics, 8)
    # What a preemption's SIGTERM does to the batch shell; SLURM itself decides about requeueing.
    subprocess.run(["scancel", "--signal=TERM", "--batch", job.job_id], check=True, timeout=30)
    assert job.wait(timeout=300) is RunState.PREEMPTED, job.logs()
    stopped_at = int(run.reload().info.reason.split("at step ")[1].split(";")[0])

    out = cli("run", "--resume", run.id)
    assert out.returncode == 0 and "submitted" in out.stdout, out.stderr
    run.reload()
    assert len(run.attempts) == 2 and run.attempts[1].job_id != run.attempts[0].job_id
    assert job_for(run).wait(timeout=300) is RunState.COMPLETED, job_for(run).logs()
    run.reload()
    assert run.attempts[-1].resumed_from == f"step-{stopped_at:08d}"
    rows = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert [r["step"] for r in rows] == list(range(4, 241, 4))
