"""Cloud clusters and the runs on them: what the host layer's SkyPilot calls
(:mod:`clustertune.remote.cloud`) must not do without knowing the runs.

- ``up`` again on a cluster whose machines went away (spot preemption, a stop) ends the runs
  that were active there PREEMPTED (``--resume`` continues them once it is back);
- a restarted cluster comes back at new addresses: the runs on it follow, so status, logs and
  ``--resume`` reach them;
- ``down`` refuses while runs are active there or keep their results only on its disks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clustertune.remote import cloud
from clustertune.remote.config import get_cluster
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import list_runs

Progress = Callable[[str], None]


def runs_on(name: str) -> list[Run]:
    return [r for r in list_runs() if (r.info.remote or {}).get("cluster") == name]


def blocking_runs(name: str) -> list[str]:
    """Why the cluster must not go away now: runs still active there, and finished runs whose
    results live only on its disks (``launch.keep_on_cluster``)."""
    out = []
    for r in runs_on(name):
        remote = r.info.remote or {}
        if not r.state.terminal:
            out.append(f"{r.id} ({r.state.value}: still running there as last seen; `clustertune status {r.id}` "
                       f"looks again, `clustertune cancel {r.id}` stops it)")
        elif remote.get("keep_on_cluster"):
            out.append(f"{r.id} (its results are kept on the cluster only (launch.keep_on_cluster): "
                       f"`clustertune status {r.id}` shows how to copy them here)")
    return out


def mark_preempted(name: str, status: str | None) -> list[str]:
    """Runs active on a cloud cluster whose machines went away (spot preemption: SkyPilot
    reports it STOPPED, INIT or not at all) end PREEMPTED; ``--resume`` continues them."""
    if status == "UP":
        return []
    out = []
    for r in runs_on(name):
        if r.state in (RunState.RUNNING, RunState.PENDING):
            r.transition(RunState.PREEMPTED, reason=f"cloud cluster {name} is {status or 'gone'} "
                                                   "(spot preemption or a stop); `clustertune run --resume "
                                                   f"{r.id}` once `clustertune cluster up {name}` is back")
            out.append(r.id)
    return out


def _follow_addresses(name: str) -> None:
    hosts = [h.to_dict() for h in get_cluster(name).hosts]
    for r in runs_on(name):
        r.update_remote(hosts=hosts)


def register(name: str, spec: cloud.CloudSpec, record: dict[str, Any], found_keys: list[dict[str, Any]]) -> list[str]:
    """:func:`clustertune.remote.cloud.register`, and the runs on the cluster follow its addresses."""
    shown = cloud.register(name, spec, record, found_keys)
    _follow_addresses(name)
    return shown


def up(name: str, spec: cloud.CloudSpec, autostop: int | None,
       on_progress: Progress | None = None) -> tuple[dict[str, Any], list[str]]:
    """Start (or reuse, or restart) the cloud cluster ``name``: the runs that were active on it
    when its machines went away end PREEMPTED, and the runs on it follow its new addresses."""

    def seen(status: str | None) -> None:
        for run_id in mark_preempted(name, status):
            if on_progress is not None:
                on_progress(f"run {run_id}: PREEMPTED (the cluster was {status or 'gone'})\n")

    record, shown = cloud.up(name, spec, autostop, on_progress, seen=seen)
    _follow_addresses(name)
    return record, shown


def down(name: str, force: bool = False, on_progress: Progress | None = None) -> None:
    """Tear the cloud cluster down, unless runs are active there or keep their results only on
    its disks (``force`` tears it down anyway)."""
    cloud.require_cloud_cluster(name)
    blocking = blocking_runs(name)
    if blocking and not force:
        raise cloud.CloudError(f"cloud cluster {name!r} not torn down: its disks go with it, and\n  "
                               + "\n  ".join(blocking) + "\nPass --force to tear it down anyway")
    cloud.down(name, on_progress)
