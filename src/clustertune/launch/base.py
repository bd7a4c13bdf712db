"""Launcher / Job protocols and the backend registry.

Each backend (local, slurm, ssh, remote functions) is a :class:`Launcher` listed in
:data:`BACKENDS` under the name that it writes into ``run.json["backend"]``. Everything that follows a run by its id (status,
logs, cancel, wait) goes through :func:`job_for`, which reattaches to the run's job from
``run.json`` alone, so it works from any process, long after the one that submitted it exited.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from clustertune.errors import RunError, UserError
from clustertune.launch.plan import LaunchPlan
from clustertune.recipe.schema import Recipe
from clustertune.runs.job import Announce, Job, follow, wait
from clustertune.runs.run import Run
from clustertune.train.sealed import accept_for_resume

__all__ = ["BACKENDS", "Job", "Launcher", "Reattach", "Resuming", "accept_checkpoint", "follow", "job_for", "launcher",
           "register", "wait"]


@dataclass(frozen=True)
class Resuming:
    """A run about to go on (``--resume``): checked by its backend before anything changes."""

    run: Run
    trust_checkpoint: bool = False
    """Sign its newest checkpoint with this user's key when it is not (the user vouches for it)."""


def accept_checkpoint(resuming: Resuming) -> Path | None:
    """The newest checkpoint of a resumed run, its signature checked (or, trusted, signed); None
    when it has none. Only state.json is read: each rank checks every file before loading it.
    A user's own command keeps its checkpoints itself: nothing to accept."""
    if resuming.run.paths.is_command:
        return None
    return accept_for_resume(resuming.run.paths, resuming.trust_checkpoint)


class Reattach(Protocol):
    """What every backend does: reattach to a run it started, from ``run.json`` alone."""

    name: str

    def job(self, run: Run) -> Job:
        """The job of an existing run of this backend."""
        ...


class Launcher(Reattach, Protocol):
    """A backend that runs recipes: checks a recipe against it, describes a plan (the dry run),
    submits a run. (``ssh-remote`` only reattaches: its runs start through remote functions.)

    :func:`clustertune.launch.submit.launch` calls ``check`` then ``submit`` on the same object."""

    prepares_data_here: bool | None
    """Whether :func:`~clustertune.launch.submit.launch` prepares the data on this machine once
    the run exists (False: the job does it as its first step, where it runs), unless
    ``launch.prepare_data`` says otherwise; None: the backend's ``check`` prepares it itself."""

    def check(self, recipe: Recipe, plan: LaunchPlan, resuming: Resuming | None = None) -> None:
        """Problems found before anything changes (a missing ``sbatch``, too few hosts): for a
        new run before its directory exists; for a resumed one (``resuming``) before its state
        moves, and here its checkpoint is accepted (:func:`accept_checkpoint`) once whatever the
        backend must do first is done (an SSH run's results gathered from its hosts)."""
        ...

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        """What a launch would start, as lines to print (``--dry-run``)."""
        ...

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None,
               show_progress: bool = True) -> Job:
        """Start ``run``; returns its job (finished or not, as the backend goes). ``announce``
        tells the user where it runs and how to follow it; ``show_progress``: a progress bar
        where the training shows in this terminal (in this process)."""
        ...


# Backend name (as run.json records it) -> "module:factory". Modules are imported on first use,
# so the CLI's cold start pays only for the backend it talks to, and no backend module needs to
# import this one to make itself known.
BACKENDS: dict[str, str] = {
    # One rank in this very process; its runs record "local" (they are followed like one).
    "inprocess": "clustertune.launch.inprocess:InProcessLauncher",
    "local": "clustertune.launch.local:LocalLauncher",
    "slurm": "clustertune.launch.slurm:SlurmLauncher",
    "ssh": "clustertune.launch.ssh:SshLauncher",
    "ssh-remote": "clustertune.remote.backend:RemoteLauncher",  # calls, exec, objects on SSH hosts
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
        module, attr = BACKENDS[name].split(":")
    except KeyError:
        known = ", ".join(sorted({*BACKENDS, *_EXTRA}))
        raise RunError(f"backend {name!r} is not known to this clustertune (known: {known})") from None
    factory: Callable[[], Launcher] = getattr(importlib.import_module(module), attr)
    return factory()


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
