"""Helpers for your own training script run by ``clustertune launch``: standard library only.

``import clustertune.script`` loads no third-party module, and the launcher puts this package on
every node's ``PYTHONPATH``, so a script can use it whether or not the job's environment has
clustertune installed::

    from clustertune import script
    ckpt = script.checkpoint_dir()           # $CLUSTERTUNE_CHECKPOINT_DIR (run dir/checkpoints)
    for step in range(start, steps):
        ...
        if script.should_stop():             # a stop request: save, then exit 0
            save(ckpt); break

A stop request (SLURM's signal before the time limit, a preemption, ``clustertune cancel``)
reaches every rank as SIGTERM; the rank is killed ``launch.stop_grace_seconds`` later. The first
call of :func:`should_stop` makes SIGTERM set a flag instead of ending the process, and a rank
that is already exiting ignores it (a request that arrives while it tears down is already met).
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from pathlib import Path

# Files in the run directory shared with the launcher (``clustertune.runs.paths`` names them
# from here): the stop request every rank watches, and the mark that a stop is a cancel.
STOP_FILE = "stop-request"
CANCEL_FILE = "cancel-request"
# A copy of this package inside the run directory, appended to the script's PYTHONPATH, so the
# helper imports where the job's environment has no clustertune installed.
LIB_DIR = "lib"
CHECKPOINTS_DIR = "checkpoints"

# The environment a script's ranks get (besides torchrun's RANK, WORLD_SIZE, LOCAL_RANK...).
RUN_DIR_ENV = "CLUSTERTUNE_RUN_DIR"
CHECKPOINT_DIR_ENV = "CLUSTERTUNE_CHECKPOINT_DIR"
ATTEMPT_ENV = "CLUSTERTUNE_ATTEMPT"
RUN_ID_ENV = "CLUSTERTUNE_RUN_ID"

_stop = threading.Event()
_installed = False
_last_check = 0.0


def run_dir() -> Path | None:
    """The run directory (``$CLUSTERTUNE_RUN_DIR``); None outside ``clustertune launch``."""
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value else None


def checkpoint_dir() -> Path | None:
    """Where to save and find checkpoints (``$CLUSTERTUNE_CHECKPOINT_DIR``); kept across attempts."""
    value = os.environ.get(CHECKPOINT_DIR_ENV)
    return Path(value) if value else None


def attempt() -> int:
    """This attempt's number: 1 the first time, 2 after a requeue or ``--resume``..."""
    try:
        return int(os.environ.get(ATTEMPT_ENV, "1"))
    except ValueError:
        return 1


def _on_term(signum: int, frame: object) -> None:
    _stop.set()


def _ignore_term_on_exit() -> None:
    # Python puts SIG_DFL back for its own handlers late in shutdown, so a stop request that
    # reaches a rank while it tears down (torch takes a while) would kill a rank that saved and
    # exits 0. Exit handlers run before that; ignoring SIGTERM here keeps the exit code honest.
    if signal.getsignal(signal.SIGTERM) is _on_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _install() -> None:
    global _installed
    _installed = True
    # Only the main thread may set handlers; a handler the script set itself stays.
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_term)
        atexit.register(_ignore_term_on_exit)


def should_stop() -> bool:
    """Whether this rank was asked to stop (SIGTERM, or the run's stop-request file): save a
    checkpoint and exit 0, and the launcher requeues the run where it can. Cheap to call every
    step: the file is looked at at most once a second."""
    global _last_check
    if not _installed:
        _install()
    if _stop.is_set():
        return True
    now = time.monotonic()
    if now - _last_check >= 1.0:
        _last_check = now
        d = run_dir()
        if d is not None and (d / STOP_FILE).exists():
            _stop.set()
    return _stop.is_set()
