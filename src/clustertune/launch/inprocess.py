"""The in-process backend: one rank, trained in the launching process itself, with no launcher
(what a run on one CPU or one GPU needs).

Its ``check`` does more than the other backends' do, because it can: it loads the model config,
prepares the data into the cache and, resumed, verifies the checkpoint, all before the run
directory exists, so a bad input leaves nothing behind. ``submit`` then trains and returns once
the run ended. Its runs record the backend ``local`` in run.json: afterwards they are followed,
listed and cancelled like any other run on this host (:class:`~clustertune.launch.local.LocalJob`).

This module stays light: the training side (:mod:`clustertune.launch.train_here`) imports torch,
and is imported only by ``check`` and ``submit``, so a dry run or a CLI start never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clustertune.launch.base import Announce, Resuming
from clustertune.launch.local import LocalJob
from clustertune.launch.plan import LaunchPlan
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run
from clustertune.train.library_logs import LibraryLogs

if TYPE_CHECKING:
    from clustertune.launch.train_here import Ready

IN_PROCESS_LINE = "# runs in this process (one rank, no launcher): set launch.procs_per_node or launch.backend"


class InProcessLauncher:
    """Training in this process. ``check`` must come first: ``submit`` trains on what it found."""

    name = "inprocess"
    # None: check() prepares the data itself, before the run directory exists (a failure leaves
    # none), whatever launch.prepare_data says.
    prepares_data_here = None

    def __init__(self) -> None:
        self._ready: Ready | None = None
        self._held: list = []  # the libraries' warnings from check(), for the run's log

    def check(self, recipe: Recipe, plan: LaunchPlan, resuming: Resuming | None = None) -> None:
        # First: some libraries warn as they are imported, and those warnings belong in the run's log.
        libraries = LibraryLogs().start()
        try:
            # Imported here: it imports torch, which a dry run and the CLI's start-up never need.
            from clustertune.launch.train_here import get_ready

            self._ready = get_ready(recipe, resuming)
        except BaseException:
            libraries.stop()  # nothing will start: what they said is shown after all
            raise
        self._held = libraries.hand_over()

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        return [IN_PROCESS_LINE]

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None,
               show_progress: bool = True) -> LocalJob:
        """Trains and returns once the run ended (the run is then terminal)."""
        if self._ready is None:
            raise RuntimeError("InProcessLauncher.submit() before check(): check the recipe first")
        libraries = LibraryLogs().hold(self._held).start()
        self._held = []
        try:
            # Imported here: it imports torch (check() imported it already).
            from clustertune.launch.train_here import train_run

            train_run(recipe, run, self._ready, show_progress, libraries)
        finally:
            libraries.stop()
        return LocalJob(run)

    def job(self, run: Run) -> LocalJob:
        return LocalJob(run)
