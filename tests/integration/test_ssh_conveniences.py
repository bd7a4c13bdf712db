"""What Runhouse users reach for: ``ct.Env`` and ``ct.get_ref`` at the top of the package, and
a finished ``.remote()`` call listed as finished without anyone asking for its status."""

from __future__ import annotations

import json
import time
from pathlib import Path

import clustertune as ct
from clustertune.remote.envs import Env
from clustertune.remote.functions import Ref
from clustertune.runs.state import RunState
from tests.helpers import cli


def _triple(x):
    return 3 * x


def test_listing_refreshes_a_finished_remote_call_and_the_names_are_exported(ssh_cluster) -> None:
    assert ct.Env is Env and "Env" in ct.__all__ and "get_ref" in ct.__all__
    ref = ct.function(_triple).to(ct.cluster("loop"), env=ct.Env()).remote(4)
    # Wait on the host's own record (never asking the client's status, which would refresh it).
    state = Path(ssh_cluster.hosts[0].root) / "runs" / ref.run_key / "state.json"
    deadline = time.time() + 60
    while not (state.is_file() and json.loads(state.read_text()).get("state") == "COMPLETED"):
        assert time.time() < deadline, "the call did not finish on the host"
        time.sleep(0.2)
    assert not ct.get_run(ref.run_key).state.terminal  # the client has not looked yet
    listed = cli("runs")
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ref.run_key in ln)
    assert "COMPLETED" in line
    assert ct.get_run(ref.run_key).state is RunState.COMPLETED
    again = ct.get_ref(ref.run_key)
    assert isinstance(again, Ref) and again.result() == 12
