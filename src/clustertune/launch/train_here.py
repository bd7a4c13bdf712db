"""What the in-process backend (:mod:`clustertune.launch.inprocess`) does: the checks and the
data preparation before the run directory exists (a bad input fails before there is one), then
one attempt of training in this process. It imports torch: the CLI imports it only to train.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clustertune.data.cache import PreparedDataset, log_to_stderr, prepare
from clustertune.data.staging import read_run_data, write_run_data
from clustertune.errors import DiskFullError, RunError, UserError
from clustertune.fsutil import is_no_space
from clustertune.models.adapters import check_adapter, check_resume_recipe
from clustertune.models.build import check_sequence_fits, resolve_config
from clustertune.recipe.schema import Recipe
from clustertune.runs.report import interrupted_text
from clustertune.launch.base import Resuming, accept_checkpoint
from clustertune.runs.run import CANCELLED_BY_USER, Run, interrupt_reason
from clustertune.runs.state import RunState
from clustertune.train import checkpoint as ckpt
from clustertune.train.entry import execute
from clustertune.train.library_logs import LibraryLogs
from clustertune.train.precision import mixed_precision
from clustertune.train.stop import STOP_SIGNALS, StopFlag
from clustertune.train.strategies.zero import check_strategy
from clustertune.train.cls_metrics import metric_functions

log = logging.getLogger("clustertune")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is now (rich's live display swaps it while a bar is shown)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@dataclass
class Checked:
    """What preflight learnt: the prepared data and the model config it checked (neither for
    RL runs, whose trainers load their own prompts and models)."""

    prepared: PreparedDataset | None
    config: Any


def use_device(recipe: Recipe) -> None:
    """``train.device: cpu`` in this process: the GPUs are hidden before CUDA starts, so every
    later device and precision decision sees none."""
    if recipe.train.device != "cpu":
        return
    if torch.cuda.is_initialized():
        raise UserError("train.device=cpu: CUDA has already started in this Python process; start it "
                        "with CUDA_VISIBLE_DEVICES='' or use `clustertune run`")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def preflight(recipe: Recipe) -> Checked:
    """Checks that need data or a model config, and the data preparation itself (a cache hit
    when the same data was prepared before), done before any run directory exists."""
    use_device(recipe)  # first: before anything can start CUDA
    check_strategy(recipe, mixed_precision(recipe))
    if recipe.task == "rlhf":  # TRL's trainers load their own prompts/pairs; nothing to prepare here
        # Deferred: importing it pulls in accelerate, peft, tokenizers, transformers, which this module's importers do not need.
        from clustertune.train.rl import preflight_rl

        preflight_rl(recipe)
        return Checked(prepared=None, config=None)
    if recipe.train.metrics:  # a metric function that does not import stops the run before it starts
        metric_functions(recipe.train.metrics, recipe.model.num_labels or 2)
    config = resolve_config(recipe, None)
    check_sequence_fits(recipe, config)
    check_adapter(recipe, config)  # target modules exist, PEFT can wrap, bitsandbytes for QLoRA
    with log_to_stderr():
        prepared = prepare(recipe)
    return Checked(prepared=prepared, config=config)


def _check_same_data(run: Run, prepared: PreparedDataset) -> None:
    """A resumed run must train on the data it started with."""
    if run.paths.data.is_file():
        before = read_run_data(run.paths).fingerprint
        if before != prepared.fingerprint:
            raise RunError(
                f"run {run.id} trained on prepared data {before}, but its recipe's data now gives "
                f"{prepared.fingerprint} (the source files or the tokenizer changed); start a new run instead of --resume"
            )


def _attach_log(run: Run, libraries: LibraryLogs) -> list[logging.Handler]:
    log.setLevel(logging.DEBUG)
    fh = logging.FileHandler(run.paths.log, encoding="utf-8")
    fh.setLevel(logging.DEBUG)
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    # The libraries' warnings into the file only (with their logger's name), never the terminal.
    lib = logging.FileHandler(run.paths.log, encoding="utf-8")
    lib.setLevel(logging.WARNING)
    lib.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(name)s] %(message)s"))
    libraries.attach(lib)
    sh = _StderrHandler()
    sh.setLevel(logging.INFO)
    sh.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(fh)
    log.addHandler(sh)
    log.propagate = False
    return [fh, sh, lib]


def resume_target(resuming: Resuming) -> Path | None:
    """Latest complete checkpoint of the resumed run, verified (trusted: signed first when it is
    not, on the user's word); None when it has none."""
    newest = accept_checkpoint(resuming)
    if newest is None:
        return None
    ckpt.verify_checkpoint(newest)  # an unsigned or corrupt one stops here, before anything changes
    return newest


def _execute_stoppable(recipe: Recipe, run: Run, resume_from: Path | None, show_progress: bool) -> str | None:
    """Train with SIGTERM/SIGUSR2 (and the run's stop file) as stop requests: the loop writes a
    checkpoint at the next step boundary and returns. What stopped it, or None when it finished.
    The signal handlers this process had before are put back afterwards."""
    for stale in (run.paths.stop_request, run.paths.cancel_request):  # left by an earlier attempt
        stale.unlink(missing_ok=True)
    removed = ckpt.clean_stale(run.paths)  # nothing else runs this run now
    if removed:
        log.info("removed what an earlier attempt left unfinished: %s", ", ".join(removed))
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        stop = StopFlag(run.paths.stop_request)
        return execute(recipe, run.paths, resume_from, show_progress, stop=stop).stopped_by
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in before.items():
                signal.signal(sig, handler)


@dataclass
class Ready:
    """What the checks before an in-process run found: its data and, resumed, its checkpoint."""

    checked: Checked
    resume_from: Path | None
    resumed: bool


def get_ready(recipe: Recipe, resuming: Resuming | None) -> Ready:
    """Everything that can fail on the user's input, before anything changes: the checkpoint to
    resume from (and that the recipe still fits it), the model config, the data (prepared here)."""
    resume_from = resume_target(resuming) if resuming is not None else None
    if resume_from is not None:
        check_resume_recipe(resume_from, recipe)  # the same base and adapter settings
    checked = preflight(recipe)
    if resuming is not None and checked.prepared is not None:
        _check_same_data(resuming.run, checked.prepared)
    return Ready(checked=checked, resume_from=resume_from, resumed=resuming is not None)


def train_run(recipe: Recipe, run: Run, ready: Ready, show_progress: bool, libraries: LibraryLogs) -> None:
    """Train ``run`` here, as one attempt: its log, its data, the loop, how it ended. A failure
    leaves it FAILED (reason and traceback in run.json) and raises. The libraries' warnings
    (``libraries``, diverted by the caller) go into the run's log."""
    handlers = _attach_log(run, libraries)
    resume_from = ready.resume_from
    try:
        run.start_attempt(resumed_from=resume_from.name if resume_from else None)
        if ready.resumed and resume_from is None:
            log.info("run %s has no checkpoint yet: training starts again from step 0", run.id)
        log.info("run %s: %s (%s)", run.id, recipe.name, run.paths.root)
        if ready.checked.prepared is not None:
            p = ready.checked.prepared
            log.info("data: %s, %s in %.2fs (%s, %.1f MB)", p.fingerprint, "cache hit" if p.hit else "prepared",
                     p.seconds, p.dir, p.total_bytes / 1e6)
            write_run_data(p, run.paths)  # what the nodes read: never raw data
        stopped_by = _execute_stoppable(recipe, run, resume_from, show_progress)
        if stopped_by is not None:
            cancelled = run.paths.cancel_request.exists()
            why = CANCELLED_BY_USER if cancelled else f"stop request ({stopped_by})"
            run.transition(RunState.CANCELLED if cancelled else RunState.PREEMPTED, reason=f"{why}; checkpoint written")
        else:
            run.transition(RunState.COMPLETED)
            log.info("done. model: %s  metrics: %s", run.paths.model, run.paths.metrics)
    except KeyboardInterrupt:
        run.record_end(RunState.CANCELLED, reason=interrupt_reason(run.paths))
        log.warning("%s", interrupted_text(run))  # which checkpoint is kept, how to go on
        raise
    except UserError as exc:
        run.record_end(RunState.FAILED, reason=str(exc))
        log.error("run %s failed: %s", run.id, exc)
        raise
    except BaseException as exc:
        if is_no_space(exc):  # metrics, logs, the final model: one message, not a traceback
            full = DiskFullError(f"no space left on the device of {run.paths.root} ({exc}); free space there, "
                                 f"then `clustertune run --resume {run.id}` continues from the newest checkpoint")
            run.record_end(RunState.FAILED, reason=str(full))
            log.error("run %s failed: %s", run.id, full)
            raise full from exc
        run.record_end(RunState.FAILED, reason=f"{type(exc).__name__}: {exc}", traceback_text=traceback.format_exc())
        log.error("run %s failed: %s: %s", run.id, type(exc).__name__, exc)
        raise
    finally:
        for h in handlers:
            log.removeHandler(h)
            h.close()
