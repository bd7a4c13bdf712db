"""An RL run on the real SLURM test cluster: submitted like any run, stopped by the time-limit
signal (USR2 to the batch shell), requeued by the job itself, resumed from its checkpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clustertune.launch import job_for
from clustertune import api
from clustertune.recipe.load import load_recipe
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from tests.helpers import read_jsonl
from tests.helpers import wait_for_step
from tests.rl_fixtures import grpo_recipe

pytestmark = pytest.mark.usefixtures("slurm_cluster")


def test_grpo_on_slurm_stops_on_usr2_requeues_and_resumes(tiny_policy_run: Run, runs_root: Path) -> None:
    recipe = grpo_recipe(str(tiny_policy_run.paths.model), runs_root)
    recipe["train"].update(max_steps=48, log_every=4)
    recipe["data"]["max_eval_samples"] = 8
    recipe["launch"] = {"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1}
    run = api.run(load_recipe(recipe))
    job = job_for(run)
    wait_for_step(run.paths.metrics, 4, timeout=240)
    subprocess.run(["scancel", "--signal=USR2", "--batch", job.job_id], check=True, timeout=30)
    state = job.wait(timeout=400)
    run.reload()
    assert state is RunState.COMPLETED, f"{run.info.reason}\n{job.logs()}"
    first, second = run.attempts[0], run.attempts[-1]
    assert first.state == "PREEMPTED" and "USR2" in first.reason, first
    stop_step = int(first.reason.split("at step ")[1].split(";")[0])
    assert stop_step % 4 == 0 and stop_step < 48
    assert second.resumed_from == f"step-{stop_step:08d}" and second.job_id == first.job_id
    assert "requeue:" in job.logs() and "restart 1" in job.logs()
    # Every log step once, the evaluation before and after, and the final policy.
    rows = read_jsonl(run.paths.metrics)
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(4, 49, 4))
    assert [r["step"] for r in rows if r["kind"] == "eval"] == [0, 48]
    assert (run.paths.model / "model.safetensors").is_file()
