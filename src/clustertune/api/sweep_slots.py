"""Where a sweep's trials go when several run at once: each its own group of an SSH cluster's hosts,
or its own share of this machine's GPUs (``CUDA_VISIBLE_DEVICES``, so its ranks see and count
only those)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from clustertune.errors import UserError
from clustertune.launch.decision import Decision
from clustertune.launch.local import visible_gpus
from clustertune.launch.ssh import find_cluster


@dataclass(frozen=True)
class Slot:
    """Where one of the trials that run at once goes: a group of SSH hosts, or a share of this
    machine's GPUs (its CUDA_VISIBLE_DEVICES); nothing for a CPU trial here."""

    hosts: tuple[int, ...] = ()
    gpus: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        if self.hosts:
            return "host(s) " + ", ".join(map(str, self.hosts))
        return "GPU(s) " + ",".join(self.gpus) if self.gpus else ""

    def place(self, d: Decision) -> Decision:
        if self.hosts:
            return replace(d, plan=replace(d.plan, hosts=self.hosts))
        if self.gpus:
            env = dict(d.plan.env)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
            return replace(d, plan=replace(d.plan, env=tuple(sorted(env.items()))))
        return d


def gpu_shares(gpus: list[str], parallel: int) -> list[tuple[str, ...]]:
    """``parallel`` equal shares of the GPUs ``gpus`` (their ids as CUDA_VISIBLE_DEVICES names
    them; the rest left idle); none on a CPU machine. Fewer GPUs than trials at once is a UserError."""
    if not gpus or parallel == 1:
        return []
    if len(gpus) < parallel:
        raise UserError(f"--parallel {parallel} but this machine has {len(gpus)} GPU(s): at most {len(gpus)} trials at once")
    each = len(gpus) // parallel
    return [tuple(gpus[i * each:(i + 1) * each]) for i in range(parallel)]


def local_gpu_ids() -> list[str]:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return [d.strip() for d in vis.split(",") if d.strip() and d.strip() != "-1"]
    return [str(i) for i in range(visible_gpus())]


def trial_slots(backend: str, first: Decision, parallel: int) -> list[Slot]:
    """Where trials run at once: on SSH hosts one per group of hosts; here ``parallel`` of them,
    each with its share of the GPUs."""
    if backend == "ssh":
        return [Slot(hosts=group) for group in ssh_host_groups(first)]
    shares = gpu_shares(local_gpu_ids(), parallel)
    return [Slot(gpus=share) for share in shares] if shares else [Slot()] * parallel


def ssh_host_groups(decision: Decision) -> list[tuple[int, ...]]:
    """The SSH cluster's hosts in groups of ``launch.nodes``: one trial runs on each group at a time."""
    cluster = find_cluster(str(decision.recipe.launch.cluster))
    n = decision.plan.nodes
    return [tuple(range(g * n, g * n + n)) for g in range(len(cluster.hosts) // n)] or [()]
