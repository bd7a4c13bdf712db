"""`validate --on CLUSTER` and `cluster show CLUSTER` for SSH hosts, against two real sshd hosts:
the first has no GPU, the second a 16 GB T4 (a fake nvidia-smi first on the PATH of the Python the
host entry names, as a site's module or env would put the real one)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from clustertune import api
from clustertune.remote.config import add_cluster
from tests.helpers import TINY_CAUSAL, cli_here, with_

XL = {"n_layer": 48, "n_embd": 1600, "n_head": 25, "n_positions": 64}  # 1.6B parameters: ~24 GiB to fine-tune


@pytest.fixture
def t4_host(ssh_cluster, tmp_path: Path):
    """The "loop" cluster with its second host's Python seeing one 16 GB T4."""
    bin_dir = tmp_path / "t4-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'index, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%]'\n"
                   "echo '0, Tesla T4, 15360 MiB, 0 MiB, 0 %'\n")
    smi.chmod(0o755)
    python = tmp_path / "t4-python"
    python.write_text(f'#!/bin/sh\nPATH="{bin_dir}:$PATH" exec python3 "$@"\n')
    python.chmod(0o755)
    hosts = list(ssh_cluster.hosts)
    hosts[1] = dataclasses.replace(hosts[1], python=str(python))
    return add_cluster("loop", hosts)


def recipe_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(with_(TINY_CAUSAL, model={"config_overrides": XL},
                                         launch={"backend": "ssh", "cluster": "loop", "nodes": 2})))
    return path


def test_validate_on_ssh_refuses_a_host_whose_gpu_is_too_small(t4_host, tmp_path: Path) -> None:
    recipe = recipe_file(tmp_path)
    report = api.validate_on(str(recipe), [], "loop")
    hosts = [h.label for h in t4_host.hosts]
    said = {(f.status, f.what): f.said for f in report.findings}
    assert "no GPU" in said[("ok", f"host {hosts[0]}")] and "Tesla T4" in said[("ok", f"host {hosts[1]}")]
    # Only the host with a GPU is sized, by its own nvidia-smi's memory; the run's env is not built yet.
    memory = said[("problem", f"memory on {hosts[1]}")]
    assert "of Tesla T4's 15.0 GiB: does not fit" in memory and "Would fit: `" in memory
    assert not any(w == f"memory on {hosts[0]}" for _, w in said)
    assert "the run's env is not built there yet" in said[("note", f"host {hosts[0]}")]
    assert [f.what for f in report.problems] == [f"memory on {hosts[1]}"]

    out = cli_here("validate", str(recipe), "--on", "loop", "launch.procs_per_node=2")
    assert out.returncode == 2
    assert "launch.procs_per_node=2 but it has 1 GPU(s): set launch.procs_per_node=1" in out.stdout
    assert "would stop the run on loop" in out.stderr and not (tmp_path / "runs").exists()


def test_validate_on_unknown_cluster_names_the_known_ones(ssh_cluster, tmp_path: Path) -> None:
    out = cli_here("validate", str(recipe_file(tmp_path)), "--on", "nowhere")
    assert out.returncode == 2 and "no cluster 'nowhere'" in out.stderr and "known: loop" in out.stderr


def test_cluster_show_ssh_lists_hosts_and_what_fits_their_gpus(t4_host) -> None:
    out = cli_here("cluster", "show", "loop", "--json")
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    first, second = (h["host"] for h in facts["hosts"])
    assert [g["name"] for g in facts["hosts"][1]["gpus"]] == ["Tesla T4"] and facts["hosts"][0]["gpus"] == []
    # A host without a GPU fits no model; the T4 fits a small one for some shipped way of training.
    assert all(r[first] is None for r in facts["fits"]) and any(r[second] for r in facts["fits"])
    table = cli_here("cluster", "show", "loop")
    assert table.returncode == 0 and "Tesla T4 15 GiB" in table.stdout
