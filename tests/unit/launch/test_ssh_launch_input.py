"""`launch.backend: ssh` at the edges: the schema's checks, unknown clusters, too many nodes,
the dry run's per-host commands (hostile remote roots quoted), and an unreachable host."""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path

import pytest
import yaml

from clustertune.errors import ClusterError, LaunchError, RecipeError
from clustertune import api
from clustertune.api.cluster_check import ClusterCheckError
from clustertune.recipe.load import load_recipe
from clustertune.remote.config import HostSpec, add_cluster
from tests.helpers import TINY_CAUSAL, cli_here, with_

HOSTILE_ROOT = "/tmp/ct root 'x'; touch /tmp/pwned"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
def two_hosts(ct_config: Path) -> list[HostSpec]:
    hosts = [HostSpec(address="127.0.0.1", port=_closed_port(), user="root", root=HOSTILE_ROOT),
             HostSpec(address="localhost", port=_closed_port(), user="root", root="relative/root")]
    add_cluster("gpu-boxes", hosts)
    return hosts


def _ssh_recipe(**launch_keys: object) -> dict:
    return with_(TINY_CAUSAL, launch={"backend": "ssh", **launch_keys})


def test_ssh_needs_a_cluster_and_says_how_to_add_one() -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe(_ssh_recipe(nodes=2))
    text = str(exc.value)
    assert "launch.cluster" in text and "clustertune cluster add" in text


def test_more_than_one_node_is_fine_for_ssh_but_not_local() -> None:
    assert load_recipe(_ssh_recipe(cluster="c", nodes=3)).launch.nodes == 3
    with pytest.raises(RecipeError, match="launch.nodes"):
        load_recipe(with_(TINY_CAUSAL, launch={"nodes": 2}))


def test_unknown_cluster_gets_a_did_you_mean_and_the_add_command(two_hosts, runs_root: Path) -> None:
    with pytest.raises(LaunchError) as exc:
        api.run(load_recipe(_ssh_recipe(cluster="gpu-boxs")))
    text = str(exc.value)
    assert "did you mean 'gpu-boxes'" in text and "clustertune cluster add gpu-boxs HOST" in text
    assert not runs_root.exists()  # nothing was created for a recipe that cannot run


def test_more_nodes_than_hosts_is_refused_before_anything_runs(two_hosts, runs_root: Path) -> None:
    with pytest.raises(LaunchError, match=r"launch.nodes=3 but cluster 'gpu-boxes' has 2 host"):
        api.run(load_recipe(_ssh_recipe(cluster="gpu-boxes", nodes=3)))
    assert not runs_root.exists()


def test_dry_run_shows_each_hosts_command_with_quoted_paths(two_hosts, runs_root: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(TINY_CAUSAL))
    out = cli_here("run", str(recipe), "launch.backend=ssh", "launch.cluster=gpu-boxes", "launch.nodes=2",
              "launch.procs_per_node=2", "--dry-run")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert '"backend": "ssh"' in text and '"nodes": 2' in text
    host_lines = [line for line in text.splitlines() if "torch.distributed.run" in line]
    assert len(host_lines) == 2 and host_lines[0] == host_lines[1]  # every host runs the same command
    argv = shlex.split(host_lines[0])
    assert "--nnodes=2" in argv and "--nproc-per-node=2" in argv and "--rdzv-backend=c10d" in argv
    endpoint = next(a for a in argv if a.startswith("--rdzv-endpoint="))
    assert endpoint.startswith("--rdzv-endpoint=127.0.0.1:")  # the first host
    assert argv[-3:] == ["-m", "clustertune.train.entry", "."]
    # The hostile remote root is shown quoted, as a shell would need it.
    cwd_line = next(line for line in text.splitlines() if line.startswith("# host 0"))
    quoted = cwd_line.split(" in ", 1)[1].rstrip(":")
    assert shlex.split(quoted)[0].startswith(HOSTILE_ROOT + "/train/")
    assert not runs_root.exists()


def test_unreachable_host_fails_the_run_with_a_clear_error(two_hosts, runs_root: Path) -> None:
    # Asked before the launch (launch.preflight): refused, naming the host, before a run exists.
    with pytest.raises(ClusterCheckError, match=r"PROBLEM\s+host \S+127.0.0.1:\d+: .*unreachable"):
        api.run(load_recipe(_ssh_recipe(cluster="gpu-boxes", nodes=1)))
    assert not runs_root.exists()
    # Without asking: the run starts, fails, and says so in its record.
    with pytest.raises(ClusterError, match="unreachable") as exc:
        api.run(load_recipe(_ssh_recipe(cluster="gpu-boxes", nodes=1)), ["launch.preflight=false"])
    assert "127.0.0.1" in str(exc.value)
    (run_dir,) = runs_root.iterdir()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["state"] == "FAILED" and "unreachable" in info["reason"]
    # The CLI says the same without a traceback, exit 2; status names the failure.
    status = cli_here("status", run_dir.name)
    assert status.returncode == 0 and "FAILED" in status.stdout and "unreachable" in status.stdout
    assert not Path("/tmp/pwned").exists()


def test_unreachable_host_from_the_cli_exits_2(two_hosts, runs_root: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(_ssh_recipe(cluster="gpu-boxes", nodes=2)))
    out = cli_here("run", str(recipe))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "unreachable" in out.stderr and "Traceback" not in out.stderr


def test_hosts_env_defaults_to_clustertunes_own_dependencies() -> None:
    from clustertune.launch.ssh import env_for
    from clustertune.launch.decision import plan_for

    bare = load_recipe(_ssh_recipe(cluster="c"))
    env = env_for(plan_for(bare, "r", Path(".")), bare.launch)
    assert any(r.startswith("torch") for r in env.requirements) and any(r.startswith("transformers") for r in env.requirements)
    assert env.env_vars["OMP_NUM_THREADS"] == "1"  # the plan's variables reach the ranks
    reuse = load_recipe(_ssh_recipe(cluster="c", site_packages_from="/opt/py/bin/python3", requirements=["x==1"]))
    env = env_for(plan_for(reuse, "r", Path(".")), reuse.launch)
    assert env.requirements == ("x==1",) and env.site_packages_from == "/opt/py/bin/python3"
