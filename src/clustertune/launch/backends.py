"""The backend registry: each backend (in-process, local, slurm, ssh, remote functions) by the
name it writes into ``run.json["backend"]``, made by a factory that imports its module when
called (a real import, which the layer checker and go-to-definition follow; the CLI's cold start
pays only for the backend it talks to).

Everything that follows a run by its id (status, logs, cancel, wait) goes through
:func:`job_for`, which reattaches to the run's job from ``run.json`` alone, so it works from any
process, long after the one that submitted it exited.
"""

from __future__ import annotations

from collections.abc import Callable

from clustertune.errors import RunError, UserError
from clustertune.launch.base import Job, Launcher, Reattach
from clustertune.runs.run import Run

def _inprocess() -> Launcher:
    # One rank in this very process; its runs record "local" (they are followed like one).
    from clustertune.launch.inprocess import InProcessLauncher

    return InProcessLauncher()


def _local() -> Launcher:
    # Deferred: each backend is imported when it is asked for: a CLI start pays only for its own.
    from clustertune.launch.local import LocalLauncher

    return LocalLauncher()


def _slurm() -> Launcher:
    # Deferred: each backend is imported when it is asked for: a CLI start pays only for its own.
    from clustertune.launch.slurm import SlurmLauncher

    return SlurmLauncher()


def _ssh() -> Launcher:
    # Deferred: each backend is imported when it is asked for: a CLI start pays only for its own.
    from clustertune.launch.ssh import SshLauncher

    return SshLauncher()


def _ssh_remote() -> Reattach:
    # Calls, exec and objects on SSH hosts: their runs start through remote functions.
    from clustertune.calls.backend import RemoteLauncher

    return RemoteLauncher()


BACKENDS: dict[str, Callable[[], Reattach]] = {
    "inprocess": _inprocess, "local": _local, "slurm": _slurm, "ssh": _ssh, "ssh-remote": _ssh_remote,
}
_EXTRA: dict[str, Callable[[], Launcher]] = {}


def register(name: str, factory: Callable[[], Launcher]) -> None:
    """Make another backend ``name`` known (a plugin, a test)."""
    _EXTRA[name] = factory


def launcher(name: str) -> Launcher:
    """The backend ``name`` (``ssh-remote`` answers only :meth:`Reattach.job`)."""
    if name in _EXTRA:
        return _EXTRA[name]()
    try:
        factory = BACKENDS[name]
    except KeyError:
        known = ", ".join(sorted({*BACKENDS, *_EXTRA}))
        raise RunError(f"backend {name!r} is not known to this clustertune (known: {known})") from None
    return factory()  # type: ignore[return-value]  (ssh-remote only reattaches: see job_for)


def job_for(run: Run) -> Job:
    """The job of ``run``, whatever backend ran it."""
    return launcher(run.info.backend).job(run)


def refreshed(run: Run) -> Run:
    """``run`` as its backend sees it now, so a listing never shows a finished job as running;
    the recorded state where the backend cannot be asked (a host down, no SLURM here)."""
    if run.state.terminal:
        return run
    try:
        job_for(run).state()
    except UserError:
        return run
    return run.reload()
