"""A training run whose hosts cannot be reached any more (they died, their sshd is gone) is
recorded FAILED with the lost hosts named, instead of the follower stopping with an error and
leaving the run RUNNING for ever (which `--resume` then refuses)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from clustertune.remote.config import HostSpec
from clustertune.launch.ssh.results import SshJob
from clustertune.runs.run import Run
from clustertune.runs.state import RunState


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_a_run_whose_hosts_are_gone_ends_failed_naming_them(tmp_path: Path) -> None:
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    ports = [_closed_port(), _closed_port()]
    known = tmp_path / "known_hosts"  # the hosts' keys are known: what fails is reaching them
    public = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    known.write_text("".join(f"[127.0.0.1]:{p} {public}\n" for p in ports))
    hosts = [HostSpec(address="127.0.0.1", port=p, user="nobody", key=str(key),
                      root=str(tmp_path / f"root{i}"), known_hosts=str(known)).to_dict() for i, p in enumerate(ports)]
    run = Run.create(tmp_path / "runs", "lost", "causal_lm", "name: lost\n", ["test"], backend="ssh")
    run.set_remote({"cluster": "gone", "kind": "train", "nodes": [0, 1], "hosts": hosts, "key": f"{run.id}-1",
                    "started": True, "gathered": False})
    run.start_attempt(job_id=f"{run.id}-1")
    assert run.state is RunState.RUNNING

    job = SshJob(run)
    assert job.read_log(1, 0) == b""  # following the logs goes on; the state says what happened
    assert job.state() is RunState.FAILED
    reason = run.reload().info.reason or ""
    assert "node 0: " in reason and "node 1: " in reason and reason.count("unreachable") >= 2, reason
