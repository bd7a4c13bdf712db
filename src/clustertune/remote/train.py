"""Training on N SSH hosts: the run directory synced to each host, the env ensured, one
elastic launcher per host with a c10d rendezvous on the first host, results brought back.

The seam with the launch plan is :class:`NodeSpec` -> argv: :func:`default_node_command`
builds ``torchrun ... -m clustertune.train.entry RUN_DIR``; a LaunchPlan can pass its own
``node_command`` (the command for node rank i) and everything else here stays the same. The
run keeps its id: on each host it is the run key, so ``clustertune status|logs|cancel RUN_ID``
work as for any other remote run.
"""

from __future__ import annotations

import posixpath
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from clustertune.errors import ClusterError, RunError
from clustertune.remote.backend import RemoteJob, cluster_of
from clustertune.remote.cluster import Cluster
from clustertune.remote.envs import Env
from clustertune.remote.functions import start_remote
from clustertune.runs.run import Run
from clustertune.runs.state import RunState

# What stays local: run.json is the submitting side's record (the nodes never own it).
_NOT_BROUGHT_BACK = ("run.json",)


@dataclass(frozen=True)
class NodeSpec:
    """Everything the command of one node is built from."""

    node_rank: int
    nnodes: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    run_id: str
    run_dir: str
    """The run directory on this node's host."""


def default_node_command(node: NodeSpec) -> list[str]:
    """torchrun on one node: c10d rendezvous at the first host, then the node entry."""
    return ["python", "-m", "torch.distributed.run",
            "--nnodes", str(node.nnodes), "--node_rank", str(node.node_rank),
            "--nproc_per_node", str(node.nproc_per_node),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{node.master_addr}:{node.master_port}",
            "--rdzv_id", node.run_id, "--max_restarts", "0",
            "-m", "clustertune.train.entry", node.run_dir]


def remote_run_dir(cluster: Cluster, i: int, run_id: str) -> str:
    return posixpath.join(cluster.root(i), "train", run_id)


def launch_training(run: Run, cluster: Cluster, env: Env, nproc_per_node: int = 1,
                    hosts: list[int] | None = None, master_addr: str | None = None, master_port: int | None = None,
                    node_command: Callable[[NodeSpec], list[str]] = default_node_command,
                    keep_on_cluster: bool = False) -> RemoteJob:
    """Start ``run`` (its directory already holds the resolved recipe) on the cluster's hosts.

    ``master_addr`` is the first host's address as the others reach it (default: its address
    in the cluster config). Returns at once; :func:`finish_training` waits and brings back."""
    nodes = hosts if hosts is not None else list(range(len(cluster.hosts)))
    if not nodes:
        raise ClusterError(f"cluster {cluster.name!r}: no hosts to train on")
    if nproc_per_node < 1:
        raise RunError(f"nproc_per_node must be at least 1, not {nproc_per_node}")
    addr = master_addr or cluster.hosts[nodes[0]].address
    port = master_port or random.randint(20000, 39999)

    def put(i: int) -> None:
        cluster.ensure_env(i, env)
        dest = remote_run_dir(cluster, i, run.id)
        cluster.conn(i).check_call(["mkdir", "-p", dest], what=f"creating {dest}")
        cluster.conn(i).rsync(["-a", f"{run.paths.root}/", cluster.conn(i).remote(dest + "/")])

    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(put, nodes))

    def header(i: int) -> dict[str, Any]:
        spec = NodeSpec(nodes.index(i), len(nodes), nproc_per_node, addr, port, run.id, remote_run_dir(cluster, i, run.id))
        return {"argv": node_command(spec), "cwd": spec.run_dir}

    run, _ = start_remote(cluster, nodes, "exec", run.info.get("name", "train"), env, {}, b"", wait=False, stream=False,
                          run=run, node_header=header)
    run.info["remote"]["train"] = {"master": f"{addr}:{port}", "nproc_per_node": nproc_per_node,
                                   "keep_on_cluster": keep_on_cluster}
    run.save()
    return RemoteJob(run)


def finish_training(job: RemoteJob, timeout: float | None = None) -> RunState:
    """Wait for the run, then copy what the nodes wrote (metrics, checkpoints, final model,
    summary, logs) into the local run directory, unless the run keeps them on the cluster."""
    state = job.wait(timeout)
    if not state.terminal:
        return state
    train = job.remote.get("train", {})
    if not train.get("keep_on_cluster"):
        bring_back(job)
    return state


def bring_back(job: RemoteJob) -> None:
    """Copy every host's run directory back. With a c10d rendezvous the global rank 0 lands on
    whichever host joined first, so its outputs may be on any of them."""
    cluster = cluster_of(job.run)
    excludes = [f"--exclude=/{name}" for name in _NOT_BROUGHT_BACK]
    for i in job.remote["nodes"]:
        src = remote_run_dir(cluster, int(i), job.run.id)
        cluster.conn(int(i)).rsync(["-a", *excludes, cluster.conn(int(i)).remote(src + "/"), f"{job.run.paths.root}/"])
