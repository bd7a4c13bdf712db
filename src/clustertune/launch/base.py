"""Launcher / Job protocols and the backend registry.

A backend (local, slurm, ssh, remote functions) registers a :class:`Launcher` under the name
that it writes into ``run.json["backend"]``. Everything that follows a run by its id (status,
logs, cancel, wait) goes through :func:`job_for`, which reattaches to the run's job from
``run.json`` alone, so it works from any process, long after the one that submitted it exited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from clustertune.errors import RunError
from clustertune.runs.run import Run
from clustertune.runs.state import RunState


@runtime_checkable
class Job(Protocol):
    """One run's job on some backend, reattached from ``run.json``."""

    run: Run

    def state(self) -> RunState:
        """Ask the backend, record any change in ``run.json``, return the run's state."""
        ...

    def wait(self, timeout: float | None = None) -> RunState:
        """Block until the run reaches a terminal state (or ``timeout`` seconds pass)."""
        ...

    def logs(self, node: int | None = None) -> str:
        """The run's log text (one node's where the backend has several)."""
        ...

    def cancel(self) -> None:
        """Stop the run; it ends CANCELLED."""
        ...


class Launcher(Protocol):
    """A backend. Each starts runs in its own way (a ``submit`` of its own); all of them can
    reattach to a run they started."""

    name: str

    def job(self, run: Run) -> Job:
        """The job of an existing run of this backend."""
        ...


_REGISTRY: dict[str, Callable[[], Launcher]] = {}


def register(name: str, factory: Callable[[], Launcher]) -> None:
    """Make backend ``name`` known; ``factory`` is called lazily (imports stay cheap)."""
    _REGISTRY[name] = factory


def _load_builtin_backends() -> None:
    # Importing a backend module registers it. Imported here, not at the top, so that the
    # CLI's cold start does not pay for backends it does not use.
    from clustertune.launch import local, slurm, ssh  # noqa: F401
    from clustertune.remote import backend  # noqa: F401  (ssh-remote: calls, exec, objects on SSH hosts)


def launcher(name: str) -> Launcher:
    _load_builtin_backends()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "(none)"
        raise RunError(f"backend {name!r} is not known to this clustertune (known: {known})") from None
    return factory()


def job_for(run: Run) -> Job:
    """The job of ``run``, whatever backend ran it."""
    return launcher(str(run.info.get("backend", "local"))).job(run)
