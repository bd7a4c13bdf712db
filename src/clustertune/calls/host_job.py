"""What every run on SSH hosts has in common, whatever started it: the nodes it runs on, its
logs there (read from an offset, followed), and waiting for it.

A recipe trained over SSH (``ssh`` backend, :class:`clustertune.launch.ssh.results.SshJob`) and a
function call, ``exec`` or object (``ssh-remote``, :class:`clustertune.calls.backend.RemoteJob`)
are both runs of the host helper under a run key; they differ only in the key (one per
attempt for training, the run id for calls) and in how the end of the run is recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from clustertune.errors import ClusterError, RunError
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import ClusterSpec, HostSpec
from clustertune.runs.job import follow, wait
from clustertune.runs.run import Run
from clustertune.runs.state import RunState



def cluster_of(run: Run) -> Cluster:
    """The hosts ``run`` was started on, as ``run.json["remote"]`` recorded them."""
    rem = run.info.remote
    if rem is None:
        raise RunError(f"run {run.id} has no 'remote' section in {run.paths.run_json}")
    return Cluster(ClusterSpec(rem["cluster"], tuple(HostSpec(**h) for h in rem["hosts"])))


@dataclass
class HostJob:
    """The part of a job on SSH hosts that does not depend on what runs there."""

    run: Run
    _hosts: Cluster | None = field(default=None, init=False, repr=False)  # connected once, for log reads
    poll: ClassVar[float] = 1.0  # seconds between looks while waiting

    @property
    def remote(self) -> dict[str, Any]:
        if self.run.info.remote is None:
            raise RunError(f"run {self.run.id} has no 'remote' section in {self.run.paths.run_json}")
        return self.run.info.remote

    @property
    def key(self) -> str:
        """The run key on the hosts."""
        return self.run.id

    def _cluster(self) -> Cluster:
        return cluster_of(self.run)

    def _nodes(self, node: int | None = None) -> list[int]:
        nodes = [int(n) for n in self.remote["nodes"]]
        if node is None:
            return nodes
        if node not in nodes:
            raise RunError(f"run {self.run.id} ran on nodes {nodes}; it has no node {node}")
        return [node]

    def _host_states(self, cluster: Cluster) -> list[dict[str, Any]]:
        return cluster.each(lambda i: cluster.helper_json(i, "status", self.key), self._nodes())

    def _on_hosts(self) -> bool:
        """Whether any host has the run yet (a training run's data may still be being prepared)."""
        return self.run.reload().info.remote is not None

    def state(self) -> RunState:
        raise NotImplementedError  # each kind of run records its end its own way

    def settled(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> RunState:
        return wait(self, timeout, poll=self.poll)

    def log_nodes(self, node: int | None) -> list[int | None]:
        return list(self._nodes(node)) if self._on_hosts() else []

    def read_log(self, node: int | None, offset: int) -> bytes:
        assert node is not None  # every log of a run on hosts is a host's
        if self._hosts is None:
            self._hosts = self._cluster()
        try:
            return self._hosts.helper(node, "logs", self.key, "--offset", str(offset)).stdout
        except ClusterError:
            return b""  # a host gone mid-run: nothing to show from it; state() records the loss

    def logs(self, node: int | None = None) -> str:
        if not self._on_hosts():
            return ""
        cluster = self._cluster()
        nodes = self._nodes(node)
        out = []
        for i in nodes:
            r = cluster.helper(i, "logs", self.key)
            if r.rc == 3:
                raise RunError(f"run {self.run.id} is not on {cluster.hosts[i].label} any more (removed by gc?)")
            out.append(r.text if len(nodes) == 1 else "".join(f"[node {i}] {line}\n" for line in r.text.splitlines()))
        return "".join(out)

    def follow(self, node: int | None = None, poll: float = 1.0) -> Iterator[str]:
        """Log lines as they come, until the run ends (polls each node's log from an offset)."""
        return follow(self, node, poll)
