"""One attempt of a run, from its start to the state the run ends in: written once, for every
world size.

The in-process backend is a world of one rank that calls :func:`run_attempt` in the launching
process; each torchrun rank calls it from :func:`clustertune.train.entry.main`. Either way the
attempt's log, its stop requests and hang watchdog, the node-side record of its start, the
training itself and the mapping of how it ended onto the run's state are the code below:

- finished -> COMPLETED;
- stopped on request -> CANCELLED (a cancel), TIMEOUT (the time limit's signal when no requeue
  follows) or PREEMPTED (it will be requeued or resumed), with the checkpoint written;
- Ctrl-C / SIGINT -> CANCELLED (why: a cancel or an interrupt);
- an error -> FAILED, named by the rank that failed first (a rank that ran out of device
  memory is the cause even when rank 0's own error is the collective it left hanging); a full
  disk is one message with the way to go on, a diverged loss the error that says so.

Only rank 0 writes the run's state; every rank logs and re-raises its own error.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

from clustertune.errors import DiskFullError, UserError
from clustertune.fsutil import is_no_space
from clustertune.recipe.schema import Recipe
from clustertune.runs.echo import LOG_FORMAT
from clustertune.runs.paths import RunPaths
from clustertune.runs.report import interrupted_text
from clustertune.runs.run import CANCELLED_BY_USER, Run, interrupt_reason
from clustertune.runs.state import RunState
from clustertune.runs.topology import Topology
from clustertune.runs.user_code import use_run_files
from clustertune.train import checkpoint as ckpt
from clustertune.train.execute import execute
from clustertune.runs.library_logs import LibraryLogs, run_log_handler
from clustertune.train.precision import precision_name
from clustertune.models.adapters import model_source
from clustertune.train.stop import STOP_SIGNALS, StopFlag
from clustertune.train.strategies.base import OutOfMemory

log = logging.getLogger("clustertune")

# SLURM's time-limit signal (launch.signal_seconds_before): the batch shell requeues on it until
# launch.max_requeues are used up; after that, or where nothing requeues, the run timed out.
TIME_LIMIT_SIGNAL = "USR2"


@dataclass(frozen=True)
class Placement:
    """Where one attempt runs and how it is watched."""

    topology: Topology = Topology()
    launched: bool = False
    """Started by a launcher (torchrun) as one of its ranks; False: in the launching process."""
    show_progress: bool = False
    watchdog_seconds: float | None = None
    """A rank that makes no step for this long writes its stacks and exits (launched ranks)."""


@dataclass(frozen=True)
class Outcome:
    """How the attempt ended; ``state`` is what rank 0 recorded (None on the other ranks)."""

    state: RunState | None
    steps: int
    stopped_by: str | None


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is now (rich's live display swaps it while a bar is shown)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@contextlib.contextmanager
def attempt_logging(paths: RunPaths, where: Placement, libraries: LibraryLogs | None = None) -> Iterator[None]:
    """The attempt's log lines, for its length: into the run's ``logs/run.log`` (rank 0) and, on
    a launched rank, its own ``logs/rank-R.log``; INFO and above to stderr (the terminal, or the
    node's log file). The libraries' warnings (``libraries``, diverted by the caller) go into the
    run's log only, with their logger's name."""
    rank = where.topology.rank
    prefix = f"rank{rank} " if where.launched else ""
    fmt = logging.Formatter(LOG_FORMAT.format(prefix=prefix))
    level = logging.INFO if where.launched else logging.DEBUG
    files: list[Path] = [paths.rank_log(rank)] if where.launched else []
    if rank == 0:
        files.append(paths.log)
    ours: list[logging.Handler] = []
    for f in files:
        h = logging.FileHandler(f, encoding="utf-8")
        h.setFormatter(fmt)
        h.setLevel(level)
        ours.append(h)
    console = _StderrHandler()
    console.setLevel(logging.INFO)
    # In the launching process the terminal shows the message alone; a rank's stderr is a log file.
    console.setFormatter(fmt if where.launched else logging.Formatter("%(message)s"))
    ours.append(console)
    theirs: list[logging.Handler] = []
    if libraries is not None and rank == 0:
        lib = run_log_handler(paths.log)
        libraries.attach(lib)
        theirs.append(lib)
    before = (log.level, log.propagate)
    log.setLevel(level)
    log.propagate = False
    for h in ours:
        log.addHandler(h)
    try:
        yield
    finally:
        for h in ours:
            log.removeHandler(h)
        for h in ours + theirs:
            h.close()
        log.setLevel(before[0])
        log.propagate = before[1]


def stopped_state(recipe: Recipe, paths: RunPaths, topo: Topology, launched: bool, stopped_by: str) -> RunState:
    """How a run that stopped on request ends: CANCELLED (a cancel), TIMEOUT (the time limit's
    signal once no requeue follows: SLURM's requeues are used up, or no scheduler requeues this
    attempt at all), else PREEMPTED (it will be requeued, or resumed by the user)."""
    if paths.cancel_request.exists():
        return RunState.CANCELLED
    requeued = launched and recipe.launch.backend == "slurm" and topo.restart_count < recipe.launch.max_requeues
    if TIME_LIMIT_SIGNAL in stopped_by and not requeued:
        return RunState.TIMEOUT
    return RunState.PREEMPTED


def report_out_of_memory(paths: RunPaths, rank: int, exc: BaseException) -> None:
    try:
        paths.out_of_memory(rank).write_text(str(exc), encoding="utf-8")
    except OSError:
        pass  # the rank's own log has it


def failure_reason(paths: RunPaths, rank: int, exc: BaseException) -> str:
    """Why a launched run failed, as rank 0 records it: a rank that ran out of device memory is
    the cause even when rank 0's own error is the collective that rank left hanging."""
    if not isinstance(exc, OutOfMemory):
        for report in paths.out_of_memory_reports():
            other = report.stem.rsplit("-", 1)[-1]
            try:
                text = report.read_text(encoding="utf-8")
            except OSError:
                continue
            return f"rank {other} ran out of device memory (rank {rank} then failed: {type(exc).__name__}): {text}"
    return f"rank {rank}: {type(exc).__name__}: {exc}"


def disk_full(paths: RunPaths, run_id: str, exc: BaseException) -> DiskFullError:
    """One message for a full disk wherever it struck (metrics, logs, a checkpoint, the final
    model), with the way to go on."""
    if isinstance(exc, DiskFullError):
        return exc
    return DiskFullError(f"no space left on the device of {paths.root} ({exc}); free space there, "
                         f"then `clustertune run --resume {run_id}` continues from the newest checkpoint")


def _record_failure(run: Run, paths: RunPaths, where: Placement, exc: BaseException) -> BaseException:
    """Rank 0 records how the attempt failed; returns what to raise (the error, or the full disk's
    one message in place of whatever error the full disk caused)."""
    rank = where.topology.rank
    if isinstance(exc, KeyboardInterrupt):
        if not run.reload().state.terminal:
            run.record_end(RunState.CANCELLED, reason=interrupt_reason(paths))
        if not where.launched:  # a launched run's launcher says it, once for all its ranks
            log.warning("%s", interrupted_text(run))  # which checkpoint is kept, how to go on
        return exc
    if run.reload().state.terminal:  # a cancel recorded it already
        return exc
    if isinstance(exc, DiskFullError) or is_no_space(exc):
        full = disk_full(paths, run.id, exc)
        run.record_end(RunState.FAILED, reason=str(full))
        log.error("run %s failed: %s", run.id, full)
        return full
    if where.launched:
        run.record_end(RunState.FAILED, reason=failure_reason(paths, rank, exc), traceback_text=traceback.format_exc())
    elif isinstance(exc, UserError):
        run.record_end(RunState.FAILED, reason=str(exc))
    else:
        run.record_end(RunState.FAILED, reason=f"{type(exc).__name__}: {exc}", traceback_text=traceback.format_exc())
    return exc


@contextlib.contextmanager
def _stop_requests(paths: RunPaths, where: Placement, stack_log: IO[str] | None) -> Iterator[StopFlag]:
    """The attempt's stop flag (SIGTERM/SIGUSR2/SIGHUP and the run's stop file) and, on a
    launched rank, its hang watchdog; the signal handlers this process had come back after."""
    main_thread = threading.current_thread() is threading.main_thread()
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} if main_thread else {}
    stop = StopFlag(paths.stop_request, watchdog_seconds=where.watchdog_seconds, watchdog_log=stack_log)
    try:
        yield stop
    finally:
        stop.close()
        for sig, handler in before.items():
            signal.signal(sig, handler)


def run_attempt(recipe: Recipe, paths: RunPaths, where: Placement, libraries: LibraryLogs | None = None,
                prologue: tuple[str, ...] = ()) -> Outcome:
    """Train one attempt of the run in ``paths`` on this rank and record how it ended (rank 0).

    The attempt resumes from the run's newest complete checkpoint, if it has one (the launcher
    has checked its signature). ``prologue``: lines for the log once it is open. Errors are recorded, then raised (a full disk as one
    :class:`DiskFullError`). A launched rank's process then ends through :func:`exit_rank`."""
    topo = where.topology
    use_run_files(paths.files)  # before any of the user's code (rewards, metrics) is imported
    run = Run.load(paths.root) if topo.is_main else None
    with attempt_logging(paths, where, libraries), contextlib.ExitStack() as stack:
        stack_log = None
        if where.launched:
            # A fatal signal (a crash in native code) and the hang watchdog write every thread's
            # Python stack into this rank's log: what it was doing stays on record when it dies.
            stack_log = stack.enter_context(paths.rank_log(topo.rank).open("a", encoding="utf-8"))
            faulthandler.enable(file=stack_log, all_threads=True)
            stack.callback(faulthandler.disable)
        stop = stack.enter_context(_stop_requests(paths, where, stack_log))
        paths.out_of_memory(topo.rank).unlink(missing_ok=True)  # an earlier attempt's
        try:
            found = ckpt.list_checkpoints(paths)
            resume_from = found[-1] if found else None  # a resume, restart or requeue continues here
            if run is not None:
                # The attempt the launcher opened becomes RUNNING (or, after a requeue, a new one opens).
                run.node_started(topo.job_id, resume_from.name if resume_from else None)
                if len(run.attempts) > 1 and resume_from is None:
                    log.info("run %s has no checkpoint yet: training starts again from step 0", run.id)
                # This attempt is the run's only one now: what killed attempts left goes (the other
                # ranks write checkpoints only after the first save's barrier).
                removed = ckpt.clean_stale(paths)
                if removed:
                    log.info("removed what an earlier attempt left unfinished: %s", ", ".join(removed))
            if where.launched:
                log.info("rank %d/%d on node %d%s%s", topo.rank, topo.world_size, topo.node_rank,
                         f" ({topo.node_name})" if topo.node_name else "",
                         f", resuming from {resume_from.name}" if resume_from else "")
            else:
                log.info("run %s: %s (%s)", paths.run_id, recipe.name, paths.root)
            for line in prologue:  # what the launching side found before the log was open
                log.info("%s", line)
            result = execute(recipe, paths, resume_from, where.show_progress, local_rank=topo.local_rank, stop=stop)
            state = None
            if run is not None:
                state = _record_end(recipe, run, paths, where, result.stopped_by, result.steps)
            return Outcome(state, result.steps, result.stopped_by)
        except BaseException as exc:
            if where.launched or not isinstance(exc, KeyboardInterrupt):
                log.error("%s failed: %s: %s", f"rank {topo.rank}" if where.launched else f"run {paths.run_id}",
                          type(exc).__name__, exc)
            if isinstance(exc, OutOfMemory):
                report_out_of_memory(paths, topo.rank, exc)
            raised = _record_failure(run, paths, where, exc) if run is not None else exc
            if raised is not exc:
                raise raised from exc
            raise


def _record_end(recipe: Recipe, run: Run, paths: RunPaths, where: Placement, stopped_by: str | None,
                steps: int) -> RunState:
    run.reload()
    _record_preflight(run, paths)
    run.record_attempt(precision=precision_name(recipe), model=model_source(recipe),
                       fp8=True if recipe.train.fp8 else None)
    if stopped_by is None:
        run.transition(RunState.COMPLETED)
        log.info("done at step %d", steps)  # where the model and metrics are: the summary says
        return RunState.COMPLETED
    state = stopped_state(recipe, paths, where.topology, where.launched, stopped_by)
    why = CANCELLED_BY_USER if state is RunState.CANCELLED else f"stop request ({stopped_by})"
    run.transition(state, reason=f"{why} at step {steps}; checkpoint written")
    return state


def _record_preflight(run: Run, paths: RunPaths) -> None:
    """The first batches' checks, as rank 0 wrote them, onto the attempt that ran them."""
    try:
        found = json.loads(paths.preflight.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if run.last_attempt is not None and run.last_attempt.preflight is None and not run.last_attempt.resumed_from:
        run.record_attempt(preflight=found)


def exit_rank(code: int) -> NoReturn:
    """End a launched rank's process once its attempt is over, without finalizing the interpreter.

    Why: at exit a rank still has threads of torch's C++ code alive. The gloo process group's
    workers outlive ``destroy_process_group`` (FSDP2's DTensor caches keep the group referenced
    until Python tears its modules down), and a thread waiting inside a collective, or a gloo
    worker dropping the last reference to a tensor with a Python object, needs the GIL. Once
    Python is finalizing, taking the GIL ends such a thread through a forced unwind inside a
    destructor that may not throw: std::terminate, "terminate called without an active
    exception", SIGABRT, one exit in many, after the run was recorded. Everything the attempt
    writes (run.json, metrics, checkpoints, its log files) is closed by now; the standard streams
    are flushed here, and nothing is left for the finalizer to do that is worth that abort."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(code)
