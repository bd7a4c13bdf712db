"""Launcher / Job protocols, and what every backend's check does with a resumed run.

The registry of backends by the name each writes into ``run.json["backend"]`` is
:mod:`clustertune.launch.backends` (it imports the backends; they import this).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from clustertune.launch.plan import LaunchPlan
from clustertune.recipe.schema import Recipe
from clustertune.runs.job import Announce, Job, follow, wait
from clustertune.runs.run import Run
from clustertune.runs.sealed import accept_for_resume

__all__ = ["Announce", "Job", "Launcher", "Reattach", "Resuming", "accept_checkpoint", "follow", "wait"]


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

    :func:`clustertune.launch.submit.start_launch` calls ``check`` then ``submit`` on the same object."""

    prepares_data_here: bool | None
    """Whether :func:`~clustertune.launch.submit.start_launch` prepares the data on this machine once
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
               show_progress: bool = True, wait: bool = True) -> Job:
        """Start ``run``; returns its job (finished or not, as the backend goes). ``announce``
        tells the user where it runs and how to follow it; ``show_progress``: a progress bar
        where the training shows in this terminal (in this process). ``wait=False``: return
        once it started where the backend can (SSH hosts); backends that run it here always wait,
        a scheduler never does."""
        ...
