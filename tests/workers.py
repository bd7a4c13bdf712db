"""How the suite shares two cores under pytest-xdist (``-n 2 --dist loadgroup``).

- Every test that starts several training processes of its own (ranks under torchrun, nodes of
  a SLURM job, the hosts of a 2-host run) is in one group, ``ranks``, so one worker runs them one
  after another: two of them never share the two cores. A module says it starts ranks with
  ``pytestmark = pytest.mark.ranks``; every test of the SLURM cluster is in the group (so the
  cluster is started once).
- The other tests of the sshd hosts (remote calls, syncs, a server behind a forward: one process
  at a time on a host) are the ``ssh`` group: one worker, one pair of hosts.
- Every other test is grouped by its module, so module-scoped fixtures are built once.
- ``once_across_workers`` builds a costly base (the quickstart run) once for all workers: each
  worker is its own pytest session, so a session fixture alone would build it once per worker.

Tests under ``tests/unit`` get the ``unit`` marker, and ``scripts/test.sh --fast`` runs
``unit or smoke``: every unit test and one end-to-end check per backend and per server.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

RANKS, SSH = "ranks", "ssh"
# Where the workers leave each test's group for the controller's scheduler (see make_scheduler).
GROUPS_ENV = "CT_XDIST_GROUPS"
SSH_FIXTURES = {"sshd_service", "ssh_cluster", "jump_host"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ranks: starts several processes of its own (ranks, nodes, hosts); "
                                       "runs on one worker, never beside another such test")
    config.addinivalue_line("markers", "smoke: one end-to-end check per backend and server, run by `test.sh --fast`")
    config.addinivalue_line("markers", "unit: in tests/unit (given by the path)")
    if os.environ.get("PYTEST_XDIST_WORKER") is None and GROUPS_ENV not in os.environ:
        # The controller, before it starts its workers (they inherit the environment).
        fd, path = tempfile.mkstemp(prefix="ct-xdist-groups-", suffix=".json")
        os.close(fd)
        os.environ[GROUPS_ENV] = path


def group_of(item: pytest.Item) -> str:
    fixtures = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("ranks") is not None or "slurm_cluster" in fixtures:
        return RANKS
    if SSH_FIXTURES & fixtures:
        return SSH
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        if item.nodeid.startswith("tests/unit/"):
            item.add_marker(pytest.mark.unit)
        groups[item.nodeid] = group_of(item)
    path = os.environ.get(GROUPS_ENV)
    if path and os.environ.get("PYTEST_XDIST_WORKER"):
        # Every worker collects the same tests and writes the same map; the controller reads it
        # once all have collected, before it hands out any test.
        tmp = f"{path}.{os.environ['PYTEST_XDIST_WORKER']}"
        Path(tmp).write_text(json.dumps(groups))
        os.replace(tmp, path)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` by the groups above. pytest-xdist's own loadgroup renames test ids
    (``item._nodeid``), which pytest 9 no longer reads, so it would spread a group over workers:
    this scheduler takes each test's group from the map its workers wrote instead."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    path = Path(os.environ[GROUPS_ENV])

    class ByGroup(LoadScopeScheduling):
        _groups: dict[str, str] | None = None
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                text = path.read_text() if path.is_file() else ""
                self._groups = json.loads(text) if text else {}
            return self._groups.get(nodeid) or nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:  # once, before the first group is handed out
                self._ordered = True
                from tests.timing import read_slow_list

                slow = read_slow_list()
                order = sorted(self.workqueue, key=lambda g: heavy_first(g, list(self.workqueue[g]), slow))
                self.workqueue = OrderedDict((g, self.workqueue[g]) for g in order)
            super()._assign_work_unit(node)

    return ByGroup(config, log)


def heavy_first(group: str, nodeids: list[str], slow_list: dict[str, str]) -> tuple[int, int, int]:
    """The order groups are handed to the workers: the longest first, so that the end of the run
    is many short groups that fill whichever worker is free, not one long module that starts
    last (xdist's own order, by number of tests, put the 2-test SFT demo module near the end).
    Durations are not known before the run; the signs are the ``ranks`` group (every multi-rank
    test: the longest by far), the tests listed in slow_tests.txt, and integration before unit."""
    from tests.timing import _listed

    slow = sum(_listed(n, slow_list) for n in nodeids)
    if group == RANKS:
        return (0, 0, 0)
    return (1 if group == SSH or group.startswith("tests/integration/") else 2, -slow, -len(nodeids))


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp directory every worker of this run sees (pytest's own base without workers)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_across_workers(tmp_path_factory: pytest.TempPathFactory, name: str,
                        build: Callable[[Path], dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """``build(folder)`` once per test run, whichever worker asks first; the others wait for it
    and get the same folder and the JSON it returned. What is in the folder is shared: read it,
    do not change it."""
    root = shared_root(tmp_path_factory)
    folder, done = root / f"once-{name}", root / f"once-{name}.json"
    with FileLock(str(root / f"once-{name}.lock")):
        if not done.is_file():
            folder.mkdir(exist_ok=True)
            done.write_text(json.dumps(build(folder)))
    return folder, json.loads(done.read_text())
