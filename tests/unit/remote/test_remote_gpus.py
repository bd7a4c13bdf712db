"""GPUs on SSH hosts, from nvidia-smi's own CSV text: which devices a call gets, and how many
training processes a host runs when the recipe leaves it open. No GPU needed: the text below
is in the exact format ``nvidia-smi --query-gpu=index,name,memory.total,memory.used,
utilization.gpu --format=csv`` prints (header with units, ", " separators)."""

from __future__ import annotations

import pytest

from clustertune.launch.plan import build_plan
from clustertune.launch.ssh import describe_procs, procs_on_host
from clustertune.recipe.load import load_recipe
from clustertune.remote.runner_gpus import GPU_QUERY, parse_gpus, pick_free_gpus
from tests.helpers import TINY_CAUSAL, with_

# An 8-GPU node shared with other jobs: 0 and 5 train, 3 holds memory while idle (a paused
# job or a notebook), the rest carry only the driver's few MiB.
DGX_H100 = """index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]
0, NVIDIA H100 80GB HBM3, 81559 MiB, 74212 MiB, 100 %
1, NVIDIA H100 80GB HBM3, 81559 MiB, 4 MiB, 0 %
2, NVIDIA H100 80GB HBM3, 81559 MiB, 1 MiB, 0 %
3, NVIDIA H100 80GB HBM3, 81559 MiB, 30210 MiB, 0 %
4, NVIDIA H100 80GB HBM3, 81559 MiB, 4 MiB, 3 %
5, NVIDIA H100 80GB HBM3, 81559 MiB, 61032 MiB, 97 %
6, NVIDIA H100 80GB HBM3, 81559 MiB, 4 MiB, 0 %
7, NVIDIA H100 80GB HBM3, 81559 MiB, 4 MiB, 0 %
"""
# A workstation queried with noheader,nounits; a display on GPU 0; utilization not reported by
# a MIG-enabled A100 ("[N/A]").
WORKSTATION_NOUNITS = """0, NVIDIA GeForce RTX 3090, 24576, 312, 2
1, NVIDIA RTX A6000, 49140, 38742, 100
"""
MIG_A100 = """index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]
0, NVIDIA A100-SXM4-40GB, 40960 MiB, 0 MiB, [N/A]
"""


def test_the_query_is_the_one_the_fixtures_answer():
    header = DGX_H100.splitlines()[0]
    assert [col.split(" [")[0] for col in header.split(", ")] == GPU_QUERY.split(",")


def test_parse_reads_each_device_with_units_or_without():
    gpus = parse_gpus(DGX_H100)
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "used_mib": 74212,
                       "utilization": 100}
    ws = parse_gpus(WORKSTATION_NOUNITS)
    assert [(g["name"], g["used_mib"], g["utilization"]) for g in ws] == [
        ("NVIDIA GeForce RTX 3090", 312, 2), ("NVIDIA RTX A6000", 38742, 100)]
    assert parse_gpus(MIG_A100)[0]["utilization"] is None
    assert parse_gpus("") == [] and parse_gpus(DGX_H100.splitlines()[0]) == []


def test_pick_takes_the_least_loaded_free_devices():
    gpus = parse_gpus(DGX_H100)
    assert pick_free_gpus(gpus, 1) == [2]  # idle, least memory in use
    assert pick_free_gpus(gpus, 4) == [1, 2, 6, 7]  # 4 is 3% busy: ranked after the idle ones
    assert pick_free_gpus(gpus, 5) == [1, 2, 4, 6, 7]
    # 0 and 5 compute, 3 holds 30 GiB: never handed out, even when that leaves too few.
    with pytest.raises(LookupError) as exc:
        pick_free_gpus(gpus, 6)
    msg = str(exc.value)
    assert "6 GPU(s) asked for, 5 free" in msg and "GPU 3: 30210 MiB used, 0% busy" in msg
    assert pick_free_gpus(parse_gpus(WORKSTATION_NOUNITS), 1) == [0]  # a display's 312 MiB is fine
    assert pick_free_gpus(parse_gpus(MIG_A100), 1) == [0]  # unknown utilization: judged by memory


def test_a_host_without_gpus_gets_a_message_that_says_what_to_do():
    with pytest.raises(LookupError, match="no NVIDIA GPU.*gpus=0"):
        pick_free_gpus(parse_gpus(""), 1)


def test_ssh_training_runs_one_process_per_gpu_unless_the_recipe_says():
    recipe = load_recipe(with_(TINY_CAUSAL, launch={"backend": "ssh", "cluster": "c", "nodes": 2}))
    plan = build_plan(recipe, "r", ".", "python")
    assert plan.procs_per_node is None
    assert procs_on_host(plan, parse_gpus(DGX_H100)) == 8
    assert procs_on_host(plan, parse_gpus(WORKSTATION_NOUNITS)) == 2
    assert procs_on_host(plan, parse_gpus("")) == 1  # no GPU: one process on the CPU
    fixed = build_plan(load_recipe(with_(TINY_CAUSAL, launch={"backend": "ssh", "cluster": "c", "procs_per_node": 3})),
                       "r", ".", "python")
    assert procs_on_host(fixed, parse_gpus(DGX_H100)) == 3
    assert describe_procs([8, 8]) == "8" and describe_procs([8, 1]) == "8/1"
