"""clustertune against a real SLURM cluster on loopback (tests/services/slurm.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clustertune.launch import job_for
from clustertune import api
from clustertune.recipe.load import load_recipe
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run
from tests.helpers import TINY_CAUSAL, cli, read_jsonl, with_

pytestmark = pytest.mark.usefixtures("slurm_cluster")

ONE_NODE = {"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1}


def tiny(train: dict | None = None, **sections):
    base = with_(TINY_CAUSAL, train={"max_steps": 6, "log_every": 2, "eval_at_start": False})
    return load_recipe(with_(base, train=train or {}, **sections))


def test_cli_job_in_a_hostile_directory_runs_to_completed_with_logs_and_status(tmp_path: Path) -> None:
    import yaml

    pwned = Path("/tmp/pwned-ct-slurm")
    pwned.unlink(missing_ok=True)
    # Spaces, quotes and shell syntax in the runs root: everything must arrive quoted.
    root = tmp_path / "my runs" / "it's \"quoted\"; touch $(echo /tmp/pwned-ct-slurm)"
    secret = "s3cr3t-value-never-written"
    env = {"CLUSTERTUNE_RUNS": str(root), "CT_TEST_TOKEN": secret}
    recipe = tmp_path / "tiny.yaml"
    # The secret is passed through by name; a setup line proves it reached the job's environment.
    launch_ = {"env_passthrough": ["CT_TEST_TOKEN"], "setup": ['echo "secret length ${#CT_TEST_TOKEN}"']}
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 4, "log_every": 2, "eval_at_start": False},
                                           launch=launch_)))
    out = cli("run", str(recipe), "launch.backend=slurm", "launch.procs_per_node=1", "launch.cpus_per_task=1", env=env)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.split()[1]
    assert "submitted (SLURM job" in out.stdout
    state = job_for(get_run(run_id, root)).wait(timeout=300)
    run = get_run(run_id, root)
    assert state is RunState.COMPLETED, f"{run.info.reason}\n{job_for(run).logs()}"
    assert not pwned.exists()
    assert f"secret length {len(secret)}" in job_for(run).logs()
    leaked = [p for p in run.paths.root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []
    status = cli("status", run_id, env=env)
    assert status.returncode == 0 and f"{run_id} COMPLETED" in status.stdout
    logs = cli("logs", run_id, env=env)
    assert "train: job" in logs.stdout and "done" in logs.stdout  # the batch log's timed steps
    # The data was prepared inside the job, as its first step, once.
    assert logs.stdout.count("data: prepare (one task)") == 1 and "data: ready" in logs.stdout
    assert re.search(r"^data \w+: (prepared|cache hit) in ", (run.paths.logs_dir / "data.log").read_text(), re.M)
    assert run.paths.data.is_file()
    node0 = cli("logs", run_id, "--node", "0", env=env)
    assert node0.returncode == 0 and "rank 0/1" in node0.stdout
    node5 = cli("logs", run_id, "--node", "5", env=env)
    assert node5.returncode == 2 and "no log for node 5 (has: node-0.log)" in node5.stderr
    assert run.paths.model.is_dir() and (run.paths.root / "job.sbatch").is_file()
    att = run.attempts[-1]
    assert att.backend == "slurm" and att.job_id.isdigit()
    # This cluster has no accounting: sacct gives nothing and squeue -t all still knows the job.
    from clustertune.launch.slurm import sacct_view, scontrol_view, squeue_view

    assert sacct_view(att.job_id) is None
    assert scontrol_view(att.job_id).raw == squeue_view(att.job_id).raw == "COMPLETED"


@pytest.mark.smoke  # one end-to-end check of this backend in `scripts/test.sh --fast`
def test_two_node_job_trains_through_one_rendezvous(runs_root: Path, tmp_path: Path) -> None:
    # Each node stages the prepared data into its own directory ($SLURMD_NODENAME expands on the
    # node): on this loopback cluster both nodes share one disk, so the copies are told apart.
    stage = tmp_path / "node-local"
    run = api.run(tiny(launch={"backend": "slurm", "nodes": 2, "procs_per_node": 1, "cpus_per_task": 1},
                      data={"stage_to": f"{stage}/$SLURMD_NODENAME"}))
    state = job_for(run).wait(timeout=300)
    assert state is RunState.COMPLETED, f"{run.reload().info.reason}\n{job_for(run).logs()}"
    logs = run.paths.logs_dir
    assert (logs / "node-0.log").is_file() and (logs / "node-1.log").is_file()
    r0, r1 = (logs / "rank-0.log").read_text(), (logs / "rank-1.log").read_text()
    assert "rank 0/2 on node" in r0 and "rank 1/2 on node" in r1
    nodes = {line.split("(")[-1].split(")")[0] for line in (r0 + r1).splitlines() if "/2 on node" in line}
    assert nodes == {"n1", "n2"}  # one rank on each SLURM node
    assert [r["step"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"] == [2, 4, 6]
    fingerprint = json.loads(run.paths.data.read_text())["fingerprint"]
    for node in ("n1", "n2"):
        copies = list((stage / node).rglob("manifest.json"))
        assert len(copies) == 1 and fingerprint in str(copies[0]), (node, copies)


def test_logs_follow_shows_eval_and_checkpoint_lines_while_it_runs_then_cancel_by_run_id(runs_root: Path) -> None:
    import subprocess
    import sys
    import threading
    import time

    # Two nodes, and no end of its own: whatever `logs --follow` shows, it shows while the run runs.
    run = api.run(tiny(train={"max_steps": 100000, "log_every": 25, "eval_every": 50, "save_every": 50},
                      launch={**ONE_NODE, "nodes": 2}))
    job = job_for(run)
    exe = Path(sys.executable).with_name("clustertune")
    follower = subprocess.Popen([str(exe), "logs", run.id, "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    seen: list[tuple[str, RunState]] = []  # each line with the run's state when it arrived
    wanted = ("eval @ step 50:", "checkpoint step-00000050 written")

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            seen.append((line.rstrip("\n"), get_run(run.id).state))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not all(any(w in line for line, _ in seen) for w in wanted):
            assert time.monotonic() < deadline and follower.poll() is None, [line for line, _ in seen]
            time.sleep(0.2)
        lines = [line for line, _ in seen]
        arrived = {w: next(i for i, (line, _) in enumerate(seen) if w in line) for w in wanted}
        # In the order they happened, each while the run was RUNNING, one step line per log step.
        assert arrived[wanted[0]] < arrived[wanted[1]], lines
        assert all(state is RunState.RUNNING for _, state in seen[: arrived[wanted[1]] + 1]), seen
        assert any(" INFO step 25/100000  loss " in line for line in lines), lines
        out = cli("cancel", run.id)
        assert out.returncode == 0, out.stderr
        assert get_run(run.id).state is RunState.CANCELLED
        assert follower.wait(timeout=120) == 0  # the follower ends by itself with the run
    finally:
        follower.kill()
    assert job.state() is RunState.CANCELLED
    again = cli("cancel", run.id)
    assert again.returncode == 2 and "already CANCELLED" in again.stderr and "Traceback" not in again.stderr


def test_failing_node_shows_failed_with_its_last_log_lines(runs_root: Path) -> None:
    run = api.run(tiny(launch={**ONE_NODE, "env": {"CLUSTERTUNE_FAULT_KILL_AT_STEP": "2"}}))
    state = job_for(run).wait(timeout=300)
    assert state is RunState.FAILED
    status = cli("status", run.id)
    assert f"{run.id} FAILED" in status.stdout
    assert "last lines of node-0.log" in status.stdout


def test_sbatch_rejection_shows_slurms_message(runs_root: Path) -> None:
    from clustertune.errors import LaunchError

    from clustertune.api.cluster_check import ClusterCheckError

    # Asked before the queue (launch.preflight), the partition is named with the ones there are.
    with pytest.raises(ClusterCheckError, match=r"launch.partition=no-such-partition: no such partition on cluster "
                                                r"\w+ \(it has: debug, short\)"):
        api.run(tiny(launch={**ONE_NODE, "partition": "no-such-partition"}))
    assert not runs_root.exists()
    # Submitted without asking, sbatch's own refusal is shown.
    with pytest.raises(LaunchError, match="sbatch rejected the job.*[Pp]artition"):
        api.run(tiny(launch={**ONE_NODE, "partition": "no-such-partition", "preflight": False}))


def test_unreachable_rendezvous_fails_within_its_timeout_naming_the_endpoint(runs_root: Path) -> None:
    # The first node's name plus a suffix that does not resolve: no node can reach the store.
    run = api.run(tiny(launch={**ONE_NODE, "node_address_suffix": "-unreachable", "rdzv_timeout": 5}))
    state = job_for(run).wait(timeout=240)
    assert state is RunState.FAILED
    status = cli("status", run.id)
    assert "did not meet at the rendezvous n1-unreachable:" in status.stdout


def test_a_data_problem_fails_the_job_at_its_data_step(runs_root: Path) -> None:
    run = api.run(tiny(launch=ONE_NODE, data={"text_column": "body"}))
    state = job_for(run).wait(timeout=300)
    run = run.reload()
    assert state is RunState.FAILED
    assert "data step: data.text_column: column 'body' not in the train data" in run.info.reason
    assert not (run.paths.logs_dir / "rank-0.log").exists()  # no rank ever started

