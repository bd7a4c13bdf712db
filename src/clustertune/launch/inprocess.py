"""The in-process backend: one rank, trained in the launching process itself, with no launcher
(what a run on one CPU or one GPU needs).

Its ``check`` does more than the other backends' do, because it can: it loads the model config,
prepares the data into the cache and, resumed, verifies the checkpoint, all before the run
directory exists, so a bad input leaves nothing behind. ``submit`` then trains and returns once
the run ended. Its runs record the backend ``local`` in run.json: afterwards they are followed,
listed and cancelled like any other run on this host (:class:`~clustertune.launch.local.LocalJob`).

It trains through the same attempt lifecycle as every launched rank
(:func:`clustertune.train.attempt.run_attempt`, a world of one rank). This module stays light:
the training side imports torch, and is imported only by ``check`` and ``submit``, so a dry run
or a CLI start never pays for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clustertune.launch.base import Announce, Resuming, accept_checkpoint
from clustertune.launch.local import LocalJob
from clustertune.launch.plan import LaunchPlan
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.library_logs import LibraryLogs

if TYPE_CHECKING:
    from clustertune.train.preflight import TrainInputs

log = logging.getLogger("clustertune")

IN_PROCESS_LINE = "# runs in this process (one rank, no launcher): set launch.procs_per_node or launch.backend"


@dataclass
class Ready:
    """What the checks before an in-process run found: its data and, resumed, its checkpoint."""

    inputs: TrainInputs
    resume_from: Path | None


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
            # The checkpoint's signature first: an unsigned or changed one stops here.
            resume_from = accept_checkpoint(resuming) if resuming is not None else None
            # Imported here: it imports torch, which a dry run and the CLI's start-up never need.
            from clustertune.train.preflight import get_ready

            inputs = get_ready(recipe, resuming.run if resuming is not None else None, resume_from)
            self._ready = Ready(inputs, resume_from)
        except BaseException:
            libraries.stop()  # nothing will start: what they said is dropped (--debug shows it), the error stands alone
            raise
        self._held = libraries.hand_over()

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        return [IN_PROCESS_LINE]

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None,
               show_progress: bool = True, wait: bool = True) -> LocalJob:
        """Trains and returns once the run ended (the run is then terminal)."""
        if self._ready is None:
            raise RuntimeError("InProcessLauncher.submit() before check(): check the recipe first")
        ready = self._ready
        for stale in (run.paths.stop_request, run.paths.cancel_request):  # left by an earlier attempt
            stale.unlink(missing_ok=True)
        run.start_attempt(resumed_from=ready.resume_from.name if ready.resume_from else None)
        prologue: tuple[str, ...] = ()
        if ready.inputs.prepared is not None:
            # Deferred: importing it pulls in numpy, which a dry run never needs.
            from clustertune.data.run_data import data_step

            p = ready.inputs.prepared
            prologue = (f"data: {p.fingerprint}, {'cache hit' if p.hit else 'prepared'} in {p.seconds:.2f}s "
                        f"({p.dir}, {p.total_bytes / 1e6:.1f} MB)",)
            try:
                data_step(recipe, run.paths, p)  # what training reads: never raw data
            except BaseException as exc:
                run.record_end(RunState.FAILED, reason=f"writing {run.paths.data}: {type(exc).__name__}: {exc}")
                raise
        libraries = LibraryLogs().hold(self._held).start()
        self._held = []
        try:
            # Imported here: it imports torch (check() imported it already).
            from clustertune.train.attempt import Placement, run_attempt

            run_attempt(recipe, run.paths, Placement(show_progress=show_progress), libraries, prologue)
        finally:
            libraries.stop()
        return LocalJob(run.reload())

    def job(self, run: Run) -> LocalJob:
        return LocalJob(run)
