"""Stop requests (preemption, time limits) agreed by all ranks.

A request arrives as SIGTERM/SIGUSR2 to a training process or as a stop file in the run
directory (SLURM's batch shell writes it: torchrun's agent does not pass USR2 on to its
workers). Ranks may see it at different moments, so the loop asks :meth:`StopFlag.agreed`, an
all-reduce, at the same step on every rank; they then checkpoint that step together and exit.
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import torch

# SIGHUP: the terminal of a run trained in the launching process closed.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2, signal.SIGHUP)


class StopFlag:
    """Stop requests for one rank, and its hang watchdog.

    With ``watchdog_seconds``, a rank that makes no step for that long (a dead peer, a stuck
    collective) writes every thread's stack to ``watchdog_log`` and exits with an error, so the
    job fails instead of hanging until its time limit. The first :meth:`beat` (the end of the
    first step) arms it and each later one re-arms it; :meth:`paused` holds it off while the
    loop evaluates or writes a checkpoint. Loading the model, compiling the first step,
    evaluations and checkpoints can take longer than a step without anything being wrong; a
    hang there ends at the collective timeout instead.
    """

    def __init__(self, stop_file: Path | None = None, install_handlers: bool = True,
                 watchdog_seconds: float | None = None, watchdog_log: IO[str] | None = None):
        self.stop_file = stop_file
        self.requested_by: str | None = None
        self.watchdog_seconds = watchdog_seconds
        self.watchdog_log = watchdog_log
        if install_handlers and threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                signal.signal(sig, self._on_signal)
        self._armed = False
        self._held = False

    def beat(self) -> None:
        if self.watchdog_seconds:
            # faulthandler's timer runs in C: it fires even when Python is stuck in a collective.
            faulthandler.dump_traceback_later(self.watchdog_seconds, exit=True,
                                              file=self.watchdog_log or __import__("sys").stderr)
            self._armed = True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The watchdog held off for the block (an evaluation, a checkpoint), re-armed after it
        if it was armed before."""
        held = self.hold()
        try:
            yield
        finally:
            if held:
                self.release()

    def hold(self) -> bool:
        """Hold the watchdog off until :meth:`release`: for work between two hooks of another
        library's loop (TRL's evaluation and checkpoint after a step). Whether it was armed."""
        if not self._armed:
            return False
        faulthandler.cancel_dump_traceback_later()
        self._held = True
        return True

    def release(self) -> None:
        """Armed again after :meth:`hold` (nothing when it was not held)."""
        if self._held:
            self._held = False
            self.beat()

    def close(self) -> None:
        if self.watchdog_seconds:
            faulthandler.cancel_dump_traceback_later()
            self._armed = False

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Only set a flag: the loop acts at the next agreed step boundary.
        self.requested_by = signal.Signals(signum).name

    def local(self) -> bool:
        if self.requested_by is None and self.stop_file is not None and self.stop_file.exists():
            try:  # the batch shell writes the signal it received
                why = self.stop_file.read_text(encoding="utf-8").strip()
            except OSError:
                why = ""
            # A signal's name (the batch shell's) or a few words of whoever else asked (a sweep's pruner).
            cause = f"SIG{why}" if why in _CAUSES_BARE else why
            self.requested_by = f"{cause} via {self.stop_file.name}" if why else self.stop_file.name
        return self.requested_by is not None

    def agreed(self, ranks: Any) -> bool:
        """True on every rank when any rank has a stop request (a collective: call on all ranks).

        The ranks also agree on what the request was: a rank that has not seen it yet (its
        signal is still on the way, the stop file not yet visible on its node) takes the cause
        another rank saw, so every rank (rank 0 writes the run's end) ends the same way: the
        time limit's signal is a TIMEOUT everywhere, not only on the rank that got it first.
        """
        seen = torch.zeros(len(_CAUSES) + 1, device=ranks.device)
        if self.local():
            seen[_cause_index(self.requested_by or "")] = 1.0
        total = ranks.reduce(seen, reduction="sum")
        if self.requested_by is None:
            hits = [i for i, n in enumerate(total.tolist()) if n > 0]
            if hits:
                self.requested_by = (f"{_CAUSES[hits[0]]} on another rank" if hits[0] < len(_CAUSES)
                                     else "another rank")
        return bool(total.sum().item() > 0)


# What a stop request can be, by the signal it carries (a stop file names the signal the batch
# shell got); anything else is the last slot. Earlier causes win when ranks saw different ones.
_CAUSES = tuple(sig.name for sig in (signal.SIGUSR2, signal.SIGTERM, signal.SIGHUP))
_CAUSES_BARE = {name.removeprefix("SIG") for name in _CAUSES} | {"INT", "USR1"}


def _cause_index(requested_by: str) -> int:
    for i, name in enumerate(_CAUSES):
        if name in requested_by:
            return i
    return len(_CAUSES)
