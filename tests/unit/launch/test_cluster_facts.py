"""What the cluster preflight reads and decides without a cluster: SLURM's time, hostlist and GRES
syntax, `scontrol -o` records, the node probe run here, its facts against this machine's, the GPU
memory table with a site's own names, and what a bad `gpu_memory_gb` entry says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clustertune.api.cluster_check import gpu_bytes_of
from clustertune.api.node_check import environment_findings
from clustertune.errors import ClusterError
from clustertune.launch import node_probe, slurm_facts
from clustertune.launch.gpu_types import gpu_memory_gb
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CAUSAL, with_


@pytest.mark.parametrize("text, minutes", [
    ("30", 30), ("1:30", 2), ("4:00:00", 240), ("2-12", 3600), ("1-00:00:00", 1440), ("0:00:01", 1),
    ("UNLIMITED", None), ("INFINITE", None), (None, None),
])
def test_slurm_times_in_minutes(text, minutes) -> None:
    assert slurm_facts.minutes(text) == minutes


def test_a_time_slurm_would_not_take_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        slurm_facts.minutes("four hours")


def test_hostlists_and_gres_as_slurm_writes_them() -> None:
    assert slurm_facts.expand_hostlist("n[1-3],gpu07") == ("n1", "n2", "n3", "gpu07")
    assert slurm_facts.expand_hostlist("gpu[008-010,12]-ib") == ("gpu008-ib", "gpu009-ib", "gpu010-ib", "gpu12-ib")
    assert slurm_facts.gpus_of_gres("gpu:a100:4(S:0-1),gpu:l4:2,shard:8") == {"a100": 4, "l4": 2}
    assert slurm_facts.gpus_of_gres("gpu:2") == {"": 2} and slurm_facts.gpus_of_gres("(null)") == {}


def test_scontrol_one_line_records_become_partitions_and_nodes() -> None:
    parts = slurm_facts._partitions_from_text(
        "PartitionName=debug Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=n[1-2] State=UP\n"
        "PartitionName=short Default=NO MaxNodes=1 MaxTime=00:30:00 Nodes=n3 State=DRAIN\n")
    assert parts["debug"] == slurm_facts.Partition("debug", ("n1", "n2"), True, "UP", None, None)
    assert parts["short"] == slurm_facts.Partition("short", ("n3",), False, "DRAIN", 30, 1)
    nodes = slurm_facts._nodes_from_text("NodeName=n3 CPUTot=4 Gres=gpu:l4:2 RealMemory=4000 State=IDLE Partitions=short\n")
    assert nodes["n3"] == slurm_facts.Node("n3", 4, 4000, "IDLE", {"l4": 2})


def test_the_probe_runs_on_the_standard_library_alone_and_reads_back() -> None:
    # As on a node: `python -I -c SOURCE` (isolated: no clustertune on the path).
    out = subprocess.run([sys.executable, "-I", "-c", node_probe.source()], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found = node_probe.parse("a site's banner\n" + out.stdout)
    assert found == {**node_probe.facts(), "node": found["node"]}
    assert found["python"] == ".".join(map(str, sys.version_info[:3])) and found["torch"]


def test_a_nodes_facts_against_this_machines() -> None:
    here = node_probe.facts()
    same = environment_findings({**here, "node": "n1"}, here, None, gpus_wanted=False)
    assert [f.status for f in same] == ["ok"]
    other = {**here, "node": "n9", "torch": None, "python": "3.9.18", "gpus": None}
    problems = [f.said for f in environment_findings(other, here, None, gpus_wanted=True) if f.status == "problem"]
    assert "Python 3.9.18 there" in problems[0] and f"no torch there ({here['torch']} here)" in problems[0]
    assert problems[1] == "n9 has no nvidia-smi (no NVIDIA driver) although the run asks for GPUs"
    v100 = {**here, "node": "v", "gpus": [{"name": "Tesla V100", "memory_mib": 16384, "driver": "535",
                                           "compute_capability": "7.0"}]}
    bf16 = load_recipe(with_(TINY_CAUSAL, train={"precision": "bf16"}))
    said = {f.what: f.said for f in environment_findings(v100, here, bf16, gpus_wanted=True) if f.status == "problem"}
    assert said == {"precision": "train.precision=bf16 needs compute capability 8.0 or newer; v's Tesla V100 has "
                                 "7.0: set train.precision=fp16"}


def test_gpu_memory_by_site_names_and_a_sites_own_table(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(tmp_path))
    assert gpu_memory_gb("a100") == 40 and gpu_memory_gb("A100-80G") == 80 and gpu_memory_gb("NVIDIA L4") == 24
    assert gpu_memory_gb("rtx6000ada") == 48 and gpu_memory_gb("mystery") is None
    # nvidia-smi's own figure wins over the type's.
    assert gpu_bytes_of("a100", [{"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920}]) == (
        "NVIDIA A100-SXM4-80GB", 81920 * 2**20)
    (tmp_path / "clusters.yaml").write_text("gpu_memory_gb: {mystery: 96, a100: 80}\nclusters: {}\n")
    assert gpu_memory_gb("mystery") == 96 and gpu_memory_gb("A100") == 80
    (tmp_path / "clusters.yaml").write_text("gpu_memory_gb: {mystery: lots, big: -1}\n")
    with pytest.raises(ClusterError, match=r"gpu_memory_gb: mystery: 'lots', big: -1: each GPU type needs its "
                                           r"memory in GB, a positive number"):
        gpu_memory_gb("a100")


def test_the_libraries_a_recipe_loads_must_be_on_the_node() -> None:
    here = node_probe.facts()
    qlora = load_recipe({**TINY_CAUSAL, "model": {"name_or_path": "someorg/base", "adapter": {"type": "qlora"},
                                                  "attn_implementation": "flash_attention_2"}})
    node = {**here, "node": "n2", "bitsandbytes": None, "flash_attn": None,
            "gpus": [{"name": "Tesla T4", "memory_mib": 15360, "driver": "535", "compute_capability": "7.5"}]}
    said = [f.said for f in environment_findings(node, here, qlora, gpus_wanted=True) if f.status == "problem"]
    assert ("flash_attention_2 needs compute capability 8.0 or newer; n2's Tesla T4 has 7.5: set "
            "model.attn_implementation=sdpa") in said
    assert any(s.startswith("model.attn_implementation=flash_attention_2 loads flash-attn on the ranks") for s in said)
    assert any(s.startswith("model.adapter.type=qlora loads bitsandbytes on the ranks, and n2's Python has none")
               for s in said)
    fine = {**node, "bitsandbytes": "0.45.0", "flash_attn": "2.7.0",
            "gpus": [{"name": "NVIDIA L4", "memory_mib": 23034, "driver": "535", "compute_capability": "8.9"}]}
    assert [f for f in environment_findings(fine, {**here, "bitsandbytes": "0.45.0", "flash_attn": "2.7.0"}, qlora,
                                            gpus_wanted=True) if f.status == "problem"] == []


def test_the_gpus_a_job_asks_per_node_follow_the_launch_sections_own_rule() -> None:
    from clustertune.api.node_check import gpus_asked
    from clustertune.launch.plan import build_plan

    def asked(**launch):
        recipe = load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", **launch}))
        return gpus_asked(build_plan(recipe, "r", "/tmp/r", "/usr/bin/python3"))

    assert asked() == (None, 0)
    assert asked(gpus_per_node=4, gpu_type="a100") == ("a100", 4)
    # One torchrun agent (task) per node: --gpus-per-task is the node's count, whatever the ranks.
    assert asked(gpus_per_task=2, procs_per_node=2) == (None, 2)
    assert asked(gres="gpu:l4:2") == ("l4", 2) and asked(gres="gpu:3") == (None, 3)
