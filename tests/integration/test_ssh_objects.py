"""Remote objects over a real sshd: built once in a long-lived process, methods called many
times (sync and async), state kept between calls, stopped on request or by `cluster down`."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import RemoteCallError
from clustertune.runs.state import RunState
from tests.helpers import cli


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Counter:
    def __init__(self, start):
        self.value = start
        self.pid = os.getpid()
        print(f"loaded once in {self.pid}", flush=True)

    def add(self, n):
        self.value += n
        return self.value, os.getpid()

    def fail(self):
        raise KeyError("no such thing")


class Broken:
    def __init__(self):
        raise RuntimeError("cannot load the model")


def test_remote_object_keeps_state_across_sync_and_async_calls(ssh_cluster):
    c = ct.cluster("loop")
    obj = ct.cls(Counter).to(c, host=1)(10)
    assert obj.status() is RunState.RUNNING
    v1, pid1 = obj.add(1)
    futures = [obj.add.remote(1) for _ in range(3)]
    results = [f.result(timeout=60) for f in futures]
    v5, pid5 = obj.add(0)
    assert (v1, v5) == (11, 14)
    assert sorted(v for v, _ in results) == [12, 13, 14]
    assert {pid1, pid5} | {p for _, p in results} == {pid1}  # one process the whole time
    with pytest.raises(KeyError, match="no such thing"):
        obj.fail()
    assert obj.add(1)[0] == 15  # an exception does not end the object
    assert "loaded once" in cli("logs", obj.run_key).stdout
    obj.stop()
    assert obj.status() is RunState.COMPLETED
    with pytest.raises(RemoteCallError, match="not running"):
        obj.add(1)


def test_constructor_failure_and_cluster_down(ssh_cluster):
    c = ct.cluster("loop")
    with pytest.raises(RemoteCallError, match="cannot load the model"):
        ct.cls(Broken).to(c)()
    obj = ct.cls(Counter).to(c)(0)
    assert obj.add(2)[0] == 2
    assert ct.function(abs).to(c)(-3) == 3  # a sync call: the env's agent is now running
    agent_pid = int(next((Path(ssh_cluster.hosts[0].root) / "agents").iterdir()).read_text())
    r = cli("cluster", "down", "loop")
    assert r.returncode == 0 and obj.run_key in r.stdout
    assert obj.status() is RunState.CANCELLED
    deadline = time.time() + 10
    while _running(agent_pid):
        assert time.time() < deadline, "cluster down left the call agent running"
        time.sleep(0.1)
