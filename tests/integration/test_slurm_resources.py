"""SLURM's own verdict on the resource requests clustertune renders: the loopback cluster's
nodes have 4 fake a100 GPUs each (tests/services/slurm.py), and ``sbatch --test-only`` asks the
real controller whether it would schedule a script, without queueing it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clustertune.api.cluster_check import ClusterCheckError
from clustertune.errors import LaunchError, RecipeError
from clustertune.launch import job_for
from clustertune.launch.plan import build_plan
from clustertune.launch.sbatch import batch_log_name, render_sbatch
from clustertune import api
from clustertune.recipe.load import load_recipe
from clustertune.runs.state import RunState
from tests.helpers import TINY_CAUSAL, cli, with_

pytestmark = pytest.mark.usefixtures("slurm_cluster")

TINY_TRAIN = {"max_steps": 4, "log_every": 2, "eval_at_start": False}


def recipe_of(launch_: dict, **sections):
    return load_recipe(with_(TINY_CAUSAL, train=TINY_TRAIN, launch={"backend": "slurm", **launch_}, **sections))


def sbatch_test_only(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True, timeout=30)


def test_slurm_accepts_each_rendered_form_and_refuses_what_the_recipe_refuses(tmp_path: Path) -> None:
    accepted = [
        {"nodes": 2, "gpus_per_node": 4, "cpus_per_task": 2},  # the hf-slurm-training shape, scaled down
        {"nodes": 2, "gpus_per_node": 2, "gpu_type": "a100", "cpus_per_gpu": 1},
        {"nodes": 2, "gpus_per_task": 1, "gpu_type": "a100"},
        {"nodes": 2, "gres": "gpu:a100:4", "cpus_per_task": 4},
        {"nodes": 1, "gres": "gpu:2"},
        {"nodes": 2, "cpus_per_task": 1, "tmp_disk": "1G", "job_name": "gpt2_multi"},  # nodes have TmpDisk=2000 (MB)
        {"nodes": 1, "cpus_per_task": 1, "tmp_disk": 2000},
    ]
    for i, launch_ in enumerate(accepted):
        script = tmp_path / f"ok{i}.sbatch"
        script.write_text(render_sbatch(build_plan(recipe_of(launch_), f"t{i}", str(tmp_path), "/usr/bin/python3")))
        out = sbatch_test_only(script)
        assert out.returncode == 0 and "to start at" in out.stderr, (launch_, out.stderr)

    # What the schema refuses, SLURM refuses too: the pair the old rendering produced.
    with pytest.raises(RecipeError, match="launch.cpus_per_gpu"):
        recipe_of({"gpus_per_node": 2, "cpus_per_gpu": 1, "cpus_per_task": 2})
    raw = tmp_path / "both-cpus.sbatch"
    raw.write_text("#!/bin/bash\n#SBATCH --gpus-per-node=2\n#SBATCH --cpus-per-task=2\n#SBATCH --cpus-per-gpu=1\ntrue\n")
    out = sbatch_test_only(raw)
    assert out.returncode != 0 and "mutually exclusive" in out.stderr, out.stderr

    # Valid recipes this cluster cannot satisfy: SLURM's message, from a real submission.
    no_such_node = "Requested node configuration is not available"
    for launch_, said in [({"gpus_per_node": 1, "gpu_type": "rtx8000"}, no_such_node), ({"gpus_per_node": 8}, no_such_node),
                          ({"tmp_disk": "3G"}, "Temporary disk specification can not be satisfied")]:
        rendered = tmp_path / "no.sbatch"
        rendered.write_text(render_sbatch(build_plan(recipe_of(launch_), "no", str(tmp_path), "/usr/bin/python3")))
        out = sbatch_test_only(rendered)
        assert out.returncode != 0, (launch_, out.stderr)
        # Asked before the queue (launch.preflight, on by default): refused with the controller's own
        # words for the test (its test-only answer can be more general than the submission's).
        answer = out.stderr.strip().splitlines()[-1]
        with pytest.raises(ClusterCheckError, match="sbatch --test-only: refused.*" + re.escape(answer)):
            api.run(recipe_of(launch_), runs_root_dir=tmp_path / "asked")
        assert not (tmp_path / "asked").exists()
        # Without it, the submission itself is refused, and said so.
        with pytest.raises(LaunchError, match=f"sbatch rejected the job.*{said}"):
            api.run(recipe_of({**launch_, "preflight": False}), runs_root_dir=tmp_path / "runs")


def test_gpu_job_starts_one_rank_per_allocated_gpu_with_expanded_env(tmp_path: Path) -> None:
    # Two fake GPUs allocated (SLURM_GPUS_ON_NODE=2; they do not exist, so the ranks train on CPU).
    launch_ = {"gres": "gpu:a100:2", "cpus_per_task": 2, "prepare_data": "submitter",
               "env": {"CT_SEEN": "job-$SLURM_JOB_ID"}, "setup": ['echo "env check: $CT_SEEN"']}
    run = api.run(recipe_of(launch_), runs_root_dir=tmp_path / "runs")
    # Prepared here, before submitting: the job finds it and skips its data step.
    assert run.paths.data.is_file()
    state = job_for(run).wait(timeout=300)
    run = run.reload()
    job_id = run.attempts[-1].job_id
    logs = job_for(run).logs()
    assert state is RunState.COMPLETED, f"{run.info.reason}\n{logs}"
    assert f"env check: job-{job_id}" in logs
    assert "data: prepare" not in logs
    node0 = run.paths.node_log(0).read_text()
    assert "rank 0/2" in node0


def test_a_failing_setup_line_stops_the_job(tmp_path: Path) -> None:
    # The job's own behaviour (the preflight refuses this recipe first: tests/integration/test_validate_on.py).
    run = api.run(recipe_of({"procs_per_node": 1, "cpus_per_task": 1, "setup": ["false", "echo after-the-failure"],
                             "preflight": False}), runs_root_dir=tmp_path / "runs")
    state = job_for(run).wait(timeout=120)
    run = run.reload()
    batch = (run.paths.logs_dir / batch_log_name(run.attempts[-1].job_id)).read_text()
    assert state is RunState.FAILED
    assert "setup: a line failed with code 1 (launch.setup); stopping" in batch
    assert "after-the-failure" not in batch and "data: prepare" not in batch


def test_the_job_carries_its_name_and_every_log_stays_in_the_run(tmp_path: Path, runs_root: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # A site's (or a user's) SBATCH_* variables would rename the job and move its stderr out of the run.
    monkeypatch.setenv("SBATCH_JOB_NAME", "site-name")
    monkeypatch.setenv("SBATCH_ERROR", str(tmp_path / "elsewhere-%j.err"))
    run = api.launch_command([sys.executable, "-c", "print('hello from the job')"], None, overrides=["launch.backend=slurm", "launch.procs_per_node=1", "launch.cpus_per_task=1",
                            "launch.job_name=gpt2_multi", "launch.tmp_disk=1G", "launch.setup=['echo to-stderr >&2']"])
    job_id = run.attempts[-1].job_id
    seen = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30).stdout
    assert "JobName=gpt2_multi" in seen and "MinTmpDiskNode=1G" in seen, seen
    assert job_for(run).wait(timeout=180) is RunState.COMPLETED, f"{run.reload().info.reason}\n{job_for(run).logs()}"
    batch = (run.paths.logs_dir / batch_log_name(job_id)).read_text()
    assert "to-stderr" in batch and not list(tmp_path.glob("elsewhere-*"))
    status = cli("status", run.id)
    assert status.returncode == 0 and f"{run.id} COMPLETED (SLURM job {job_id}, name gpt2_multi)" in status.stdout
    assert json.loads(cli("status", run.id, "--json").stdout)["job_name"] == "gpt2_multi"
