"""Fault injection for tests and benchmarks: make one rank fail at a chosen point of training.

Unset (the normal case), nothing here does anything: the environment is read once per process
and every :func:`point` is a comparison with ``None``. Recipes never set these; only the
environment of the training processes does.

``CLUSTERTUNE_FAULT=KIND:RANK:STEP:PHASE`` (several separated by ``,``):

- KIND: ``kill`` (SIGKILL to itself), ``segfault`` (a real invalid memory read: the process
  dies of SIGSEGV) or ``hang`` (sleeps for ever: the other ranks wait in their next collective
  and the hang watchdog, ``launch.watchdog_minutes``, or the collective timeout ends the run).
- RANK: the global rank that fails, or ``*`` for every rank.
- STEP: the optimizer step being computed (1 is the first), or the step a checkpoint is for.
- PHASE: ``backward`` (the step's forward is done, its backward and gradient all-reduce are
  not: the middle of a step), ``step`` (right after the optimizer step) or ``checkpoint`` (this
  rank's checkpoint files are written, the checkpoint is not sealed yet).

``CLUSTERTUNE_FAULT_ONCE=PATH``: a fault fires only in the process that creates PATH, so the
workers torchrun restarts (``launch.max_restarts``) or a requeued job run on.

The older ``CLUSTERTUNE_FAULT_KILL_AT_STEP=N`` is ``kill:*:N:step`` with
``CLUSTERTUNE_FAULT_KILL_ONCE`` as its once-file.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import time
from dataclasses import dataclass

FAULT_ENV = "CLUSTERTUNE_FAULT"
ONCE_ENV = "CLUSTERTUNE_FAULT_ONCE"
KILL_AT_STEP_ENV = "CLUSTERTUNE_FAULT_KILL_AT_STEP"
KILL_ONCE_ENV = "CLUSTERTUNE_FAULT_KILL_ONCE"

KINDS = ("kill", "segfault", "hang")
PHASES = ("backward", "step", "checkpoint")


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int | None  # None: every rank
    step: int
    phase: str
    once: str | None = None

    def spec(self) -> str:
        return f"{self.kind}:{'*' if self.rank is None else self.rank}:{self.step}:{self.phase}"


def parse(text: str, once: str | None = None) -> list[Fault]:
    """The faults a ``CLUSTERTUNE_FAULT`` value asks for; a malformed one is a ValueError naming
    the variable and its format (a typo must not quietly inject nothing)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        fields = part.split(":")
        ok = len(fields) == 4 and fields[0] in KINDS and fields[3] in PHASES and fields[2].isdigit() \
            and (fields[1] == "*" or fields[1].isdigit())
        if not ok:
            raise ValueError(f"{FAULT_ENV}={text!r}: {part!r} is not KIND:RANK:STEP:PHASE with KIND one of "
                             f"{', '.join(KINDS)}, RANK a number or *, STEP a number, PHASE one of {', '.join(PHASES)}")
        out.append(Fault(fields[0], None if fields[1] == "*" else int(fields[1]), int(fields[2]), fields[3], once))
    return out


@functools.cache
def planned() -> tuple[Fault, ...] | None:
    """This process's faults from its environment (read once), None when there are none."""
    faults = parse(os.environ.get(FAULT_ENV, ""), os.environ.get(ONCE_ENV) or None)
    kill_at = int(os.environ.get(KILL_AT_STEP_ENV, "0") or 0)
    if kill_at:
        faults.append(Fault("kill", None, kill_at, "step", os.environ.get(KILL_ONCE_ENV) or None))
    return tuple(faults) or None


def point(phase: str, step: int, rank: int) -> None:
    """Fire the fault planned for this phase, step and rank, if any (no effect when unset)."""
    faults = planned()
    if faults is None:
        return
    for f in faults:
        if f.phase == phase and f.step == step and f.rank in (None, rank) and _first(f.once):
            fire(f.kind)


def _first(once: str | None) -> bool:
    if not once:
        return True
    try:
        os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def fire(kind: str) -> None:
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV, as a crashing native extension would
    elif kind == "hang":
        while True:  # a stuck rank: signals set flags but nothing here looks at them
            time.sleep(3600)
