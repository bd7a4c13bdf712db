"""Where a sweep's trials go when several run at once: each its share of this machine's GPUs
(what its ranks see, and so how many there are), or its own group of SSH hosts; and an array
task's runs record the task's id, `<array>_<task>`, across requeues."""

from __future__ import annotations

import pytest

from clustertune import api

from clustertune.api.sweep_slots import Slot, gpu_shares
from clustertune.errors import UserError
from clustertune.launch.local import local_procs, node_env
from clustertune.runs.topology import Topology
from tests.helpers import TINY_CAUSAL, with_


def test_gpus_are_shared_out_equally_and_too_few_are_refused() -> None:
    assert gpu_shares(["0", "1", "2", "3", "4", "5", "6", "7"], 2) == [("0", "1", "2", "3"), ("4", "5", "6", "7")]
    assert gpu_shares(["2", "5", "7"], 2) == [("2",), ("5",)]  # the ids as CUDA_VISIBLE_DEVICES names them
    assert gpu_shares([], 4) == [] and gpu_shares(["0", "1"], 1) == []
    with pytest.raises(UserError, match="--parallel 3 but this machine has 2 GPU"):
        gpu_shares(["0", "1"], 3)


def test_a_gpu_share_is_what_the_trials_ranks_see_and_count(monkeypatch: pytest.MonkeyPatch, runs_root: object) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    decision = api.decide(with_(TINY_CAUSAL, launch={"backend": "local"}), dry=True, show_progress=False)
    placed = Slot(gpus=("2", "3")).place(decision)
    assert dict(placed.plan.env)["CUDA_VISIBLE_DEVICES"] == "2,3" and placed.run_id == decision.run_id
    assert node_env(placed.plan)["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert local_procs(placed.plan) == 2  # one rank per GPU of its share, not per GPU of the machine
    assert local_procs(decision.plan) == 4
    assert Slot().place(decision) is decision
    on_hosts = Slot(hosts=(2, 3)).place(decision)
    assert on_hosts.plan.hosts == (2, 3) and Slot(hosts=(2, 3)).label == "host(s) 2, 3"
    assert "hosts" not in decision.plan.to_dict() and on_hosts.plan.to_dict()["hosts"] == (2, 3)


def test_an_array_task_records_its_array_id() -> None:
    env = {"SLURM_JOB_ID": "15", "SLURM_ARRAY_JOB_ID": "13", "SLURM_ARRAY_TASK_ID": "1"}
    assert Topology.from_env(env).job_id == "13_1"
    assert Topology.from_env({"SLURM_JOB_ID": "15"}).job_id == "15"
