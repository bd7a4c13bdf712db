"""`clustertune run RECIPE launch.backend=ssh` on two real sshd hosts: the tiny recipe trains
across both (c10d rendezvous on the first), a new process follows it by run id (status, logs,
cancel), the cancelled run resumes on the hosts from its checkpoint and its results come back
to the local run directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from clustertune.identity import derived_checkpoint_key
from tests.helpers import TINY_CAUSAL, cli, read_jsonl, tree_snapshot, with_

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

STEPS = 40
SECRET = "s3cr3t-value-never-in-files"
SECRET_ENV = {"CT_TEST_HF_TOKEN": SECRET}


def _recipe(tmp_path: Path, **launch: object) -> Path:
    recipe = with_(TINY_CAUSAL, train={"max_steps": STEPS, "log_every": 2, "save_every": 10, "eval_at_start": False},
                   launch={"backend": "ssh", "cluster": "loop", "nodes": 2, "procs_per_node": 1,
                           # The hosts reuse this interpreter's packages (torch) instead of installing them.
                           "site_packages_from": sys.executable, "env_passthrough": ["CT_TEST_HF_TOKEN"], **launch})
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _wait_for_run(runs: Path, proc: subprocess.Popen, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rj in runs.glob("*/run.json"):
            return rj.parent.name
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("no run directory appeared")


def test_two_host_run_cancel_status_logs_resume(ssh_cluster, sshd_service, tmp_path):
    runs = Path(os.environ["CLUSTERTUNE_RUNS"])
    exe = Path(sys.executable).with_name("clustertune")
    first = subprocess.Popen([str(exe), "run", str(_recipe(tmp_path))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={**os.environ, **SECRET_ENV})
    try:
        run_id = _wait_for_run(runs, first)
        # Another process follows the run by its id alone, while the first one waits on it.
        deadline = time.monotonic() + 300
        while "RUNNING" not in (st := cli("status", run_id)).stdout:
            assert st.returncode == 0 and ("PENDING" in st.stdout or "CREATED" in st.stdout), st.stdout + st.stderr
            assert time.monotonic() < deadline, "the run never started on the hosts"
            time.sleep(0.5)
        cancelled = cli("cancel", run_id)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert "CANCELLED" in cancelled.stdout
        out, _ = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 1 and "CANCELLED" in out, out
    # The terminal that started it showed the ranks' lines through the [node N] stream as they came:
    # step lines, then the stop request they were cancelled with. Each poll reads the nodes one
    # after another, so lines keep their order within a node (not across nodes): read rank 0's.
    # They read as a local run's: rank 0's records as their messages, no other rank's INFO lines.
    streamed = [ln for ln in out.splitlines() if ln.startswith("[node ")]
    step_line = next(ln for ln in streamed if re.match(r"\[node [01]\] step \d+/\d+  loss ", ln))
    assert not any(" INFO " in ln or "rank 1/2 on node" in ln for ln in streamed), out[-3000:]
    rank0 = [ln for ln in streamed if ln.startswith(step_line[:len("[node N]")])]
    assert rank0.index(step_line) < next(i for i, ln in enumerate(rank0) if "stop request" in ln), out[-3000:]
    assert "CANCELLED" in cli("status", run_id).stdout
    logs = cli("logs", run_id)
    assert logs.returncode == 0
    # One torchrun per host, two ranks in one world, stopped together at an agreed step.
    assert "[node 0]" in logs.stdout and "[node 1]" in logs.stdout
    assert "stop request" in logs.stdout, logs.stdout[-3000:]
    run_dir = runs / run_id
    info = json.loads((run_dir / "run.json").read_text())
    assert info["backend"] == "ssh" and info["state"] == "CANCELLED"
    # The checkpoint the ranks wrote on the cancel came back here (rank 0 was on either host).
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").glob("step-*"))
    assert ckpts, sorted(p.name for p in run_dir.iterdir())
    stopped_at = int(ckpts[-1].split("-")[1])
    assert 0 < stopped_at < STEPS
    assert not (run_dir / "model").exists()

    resumed = cli("run", "--resume", run_id, timeout=600, env=SECRET_ENV)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "COMPLETED" in resumed.stdout
    info = json.loads((run_dir / "run.json").read_text())
    assert [a["state"] for a in info["attempts"]] == ["CANCELLED", "COMPLETED"]
    assert info["attempts"][1]["job_id"].startswith(f"{run_id}-2@")
    assert info["attempts"][1]["resumed_from"] == ckpts[-1]  # as rank 0 recorded it on its host
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["resumed_from_step"] == stopped_at
    # Both hosts' ranks were one world: every step took a batch from each of the two ranks.
    assert summary["samples_seen"] == STEPS * TINY_CAUSAL["train"]["batch_size"] * 2
    assert (run_dir / "model" / "config.json").is_file()
    train_steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert train_steps == list(range(2, STEPS + 1, 2))  # no step lost or repeated across the attempts
    assert "COMPLETED" in cli("status", run_id).stdout
    # Each host holds one copy of the prepared data and of the code snapshot, in its own root.
    fp = json.loads((run_dir / "data.json").read_text())["fingerprint"]
    # The checkpoint key travelled the same way: the hosts signed the checkpoints this client
    # resumed from (verified above), and no file on either side holds the key.
    ckpt_key = derived_checkpoint_key().hex().encode()
    kept = list((run_dir / "checkpoints").glob("step-*"))
    assert kept and all((p / "state.sig").is_file() for p in kept)
    for h in sshd_service.hosts:
        root = h.root / tmp_path.name
        assert (root / "data" / fp / "manifest.json").is_file()
        assert len(list((root / "code").glob("clustertune-*"))) == 1
        assert (root / "train" / run_id / "recipe.yaml").is_file()
        # The pass-through secret reached the hosts through stdin only: no file holds it.
        assert not [name for name, data in tree_snapshot(root).items() if SECRET.encode() in data or ckpt_key in data]
    assert not [name for name, data in tree_snapshot(run_dir).items() if SECRET.encode() in data or ckpt_key in data]


def test_logs_follow_shows_eval_and_checkpoint_lines_from_the_hosts_while_it_runs(ssh_cluster, tmp_path):
    """Another process's `clustertune logs RUN --follow` shows rank 0's step, eval and checkpoint
    lines as they happen on the hosts, each while the run is RUNNING."""
    import threading

    from clustertune.runs import get_run

    runs = Path(os.environ["CLUSTERTUNE_RUNS"])
    exe = Path(sys.executable).with_name("clustertune")
    # No end of its own: whatever the follower shows, it shows while the run runs.
    recipe = _recipe(tmp_path, nodes=1)
    data = yaml.safe_load(recipe.read_text())
    data["train"].update(max_steps=100000, log_every=5, eval_every=10, save_every=10)
    data["launch"].pop("env_passthrough")
    recipe.write_text(yaml.safe_dump(data))
    first = subprocess.Popen([str(exe), "run", str(recipe)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    follower = None
    try:
        run_id = _wait_for_run(runs, first)
        follower = subprocess.Popen([str(exe), "logs", run_id, "--follow"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        seen: list[tuple[str, str]] = []  # each line with the run's state when it arrived

        def read() -> None:
            assert follower is not None and follower.stdout is not None
            for line in follower.stdout:
                seen.append((line.rstrip("\n"), get_run(run_id).state.value))

        threading.Thread(target=read, daemon=True).start()
        wanted = ("eval @ step 10:", "checkpoint step-00000010 written")
        deadline = time.monotonic() + 240
        while not all(any(w in line for line, _ in seen) for w in wanted):
            assert time.monotonic() < deadline and follower.poll() is None, [line for line, _ in seen]
            time.sleep(0.2)
        lines = [line for line, _ in seen]
        arrived = {w: next(i for i, (line, _) in enumerate(seen) if w in line) for w in wanted}
        assert arrived[wanted[0]] < arrived[wanted[1]], lines
        assert all(state == "RUNNING" for _, state in seen[: arrived[wanted[1]] + 1]), seen
        assert any(" INFO step 5/100000  loss " in line for line in lines), lines
        cancelled = cli("cancel", run_id)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert follower.wait(timeout=120) == 0  # the follower ends by itself with the run
        first.communicate(timeout=300)
    finally:
        for p in (first, follower):
            if p is not None and p.poll() is None:
                p.kill()


def test_kept_on_cluster_checkpoints_reach_every_host_before_a_resume(ssh_cluster, tmp_path):
    """With results kept on the cluster only rank 0's host holds the checkpoints; a resume
    needs the newest on every host. It is relayed through the submitting machine, not kept there."""
    from clustertune.launch.ssh.results import spread_checkpoints
    from clustertune.runs.run import Run
    from clustertune.runs.store import runs_root

    run = Run.create(runs_root(), "kept", "causal_lm", "name: kept\n", ["test"], backend="ssh")
    run.set_remote({"cluster": "loop", "nodes": [0, 1], "hosts": [h.to_dict() for h in ssh_cluster.hosts],
                    "key": f"{run.id}-1", "keep_on_cluster": True})
    holder = Path(ssh_cluster.hosts[1].root) / "train" / run.id / "checkpoints"
    for step, payload in ((4, b"older"), (8, b"newest weights \x00\x01")):
        (holder / f"step-{step:08d}").mkdir(parents=True)
        (holder / f"step-{step:08d}" / "model.safetensors").write_bytes(payload)
    spread_checkpoints(run)
    other = Path(ssh_cluster.hosts[0].root) / "train" / run.id / "checkpoints"
    assert sorted(p.name for p in other.iterdir()) == ["step-00000008"]
    assert (other / "step-00000008" / "model.safetensors").read_bytes() == b"newest weights \x00\x01"
    assert not run.paths.checkpoints.exists()  # relayed, not kept here


def test_a_kept_checkpoint_is_checked_before_a_resume_and_trust_signs_it_on_every_host(ssh_cluster):
    """Checkpoints kept on the cluster get the signature check a local one gets, before anything
    starts: an unsigned one is refused naming its host; --trust-checkpoint signs it there."""
    from clustertune.errors import CheckpointError
    from clustertune.identity import checkpoint_key
    from clustertune.launch.ssh.results import spread_checkpoints, vouch_for_kept_checkpoint
    from clustertune.runs.run import Run
    from clustertune.runs.store import runs_root
    from clustertune.runs.sealed import signature_problem, sign_state

    run = Run.create(runs_root(), "kept", "causal_lm", "name: kept\n", ["test"], backend="ssh")
    run.set_remote({"cluster": "loop", "nodes": [0, 1], "hosts": [h.to_dict() for h in ssh_cluster.hosts],
                    "key": f"{run.id}-1", "keep_on_cluster": True})
    hosts = [Path(h.root) / "train" / run.id / "checkpoints" / "step-00000006" for h in ssh_cluster.hosts]
    state = b'{"step": 6, "files": {}}'
    hosts[1].mkdir(parents=True)
    (hosts[1] / "state.json").write_bytes(state)
    spread_checkpoints(run)
    with pytest.raises(CheckpointError, match=rf"step-00000006 on .*{ssh_cluster.hosts[0].port}.* is not signed.*"
                                              rf"--resume {run.id} --trust-checkpoint"):
        vouch_for_kept_checkpoint(run, trust=False)
    assert not (hosts[0] / "state.sig").exists() and not (hosts[1] / "state.sig").exists()
    vouch_for_kept_checkpoint(run, trust=True)
    for ckpt in hosts:
        assert signature_problem(ckpt, state, checkpoint_key()) is None
    vouch_for_kept_checkpoint(run, trust=False)  # signed now: accepted as it is
    sign_state(hosts[0], state, key=b"another user's key")
    with pytest.raises(CheckpointError, match="signed with another key"):
        vouch_for_kept_checkpoint(run, trust=False)


def test_a_failing_node_fails_the_run_with_its_last_lines(ssh_cluster, tmp_path):
    """An env without torch (pip is already there: nothing to download): torchrun cannot start
    on either host; the run ends FAILED and status shows each node's last lines."""
    recipe = _recipe(tmp_path, site_packages_from=None, requirements=["pip"], env_passthrough=[])
    out = cli("run", str(recipe), timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED" in out.stdout and "No module named 'torch'" in out.stdout
    run_id = out.stdout.split("run ", 1)[1].split()[0]
    status = cli("status", run_id)
    assert "FAILED" in status.stdout and "[node 0]" in status.stdout and "[node 1]" in status.stdout


def test_results_kept_on_the_cluster_are_printed_where_they_are(ssh_cluster, sshd_service, tmp_path):
    """One host, procs_per_node left open on a host without GPUs (one process, shown in the
    dry run and at launch); the results stay there and the run prints their host paths and a
    command that fetches them, never local paths that do not exist."""
    recipe = with_(TINY_CAUSAL, train={"max_steps": 2, "log_every": 1, "eval_at_start": False},
                   launch={"backend": "ssh", "cluster": "loop", "nodes": 1, "keep_on_cluster": True,
                           "site_packages_from": sys.executable})
    path = tmp_path / "kept.yaml"
    path.write_text(yaml.safe_dump(recipe))
    dry = cli("run", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "1 process(es), no GPU" in dry.stdout and "--nproc-per-node=1" in dry.stdout

    out = cli("run", str(path), timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "x 1 process(es)" in out.stderr
    run_id = out.stdout.split("run ", 1)[1].split()[0]
    run_dir = Path(os.environ["CLUSTERTUNE_RUNS"]) / run_id
    assert json.loads((run_dir / "run.json").read_text())["remote"]["procs_per_node"] == [1]
    assert str(run_dir / "model") not in out.stdout and not (run_dir / "model").exists()
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in out.stdout.splitlines()
             if line.strip().startswith(("model:", "metrics:", "checkpoints:"))}
    host = ssh_cluster.hosts[0]
    remote_root = (sshd_service.hosts[0].root / tmp_path.name).resolve()
    model_path, _, where = lines["model"].partition(" on ")
    assert where == host.label and Path(model_path) == remote_root / "train" / run_id / "model"
    assert (Path(model_path) / "config.json").is_file()  # what is printed exists, on the host
    assert Path(lines["metrics"].partition(" on ")[0]).is_file()
    shown = cli("runs", "show", run_id).stdout
    assert "kept on cluster loop" in shown and str(run_dir / "metrics.jsonl") not in shown
    # The printed command brings them here, as printed (through a shell, as a user would run it).
    fetch = next(line for line in out.stdout.splitlines() if "copy them here with: " in line)
    got = subprocess.run(["sh", "-c", fetch.split("copy them here with: ", 1)[1]], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert (run_dir / "model" / "config.json").is_file() and (run_dir / "metrics.jsonl").is_file()
    assert json.loads((run_dir / "run.json").read_text())["state"] == "COMPLETED"  # run.json is not overwritten
