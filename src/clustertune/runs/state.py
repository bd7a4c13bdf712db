"""Run states and the only edges between them."""

from __future__ import annotations

import enum

from clustertune.errors import RunError


class RunState(str, enum.Enum):
    CREATED = "CREATED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"

    def __str__(self) -> str:
        # `print(run.state)` shows COMPLETED, as the CLI does (not RunState.COMPLETED).
        return self.value

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED, RunState.TIMEOUT, RunState.PREEMPTED})
# Runs that stopped part-way and may continue from their last checkpoint.
RESUMABLE = frozenset({RunState.FAILED, RunState.CANCELLED, RunState.TIMEOUT, RunState.PREEMPTED})

ALLOWED: dict[RunState, frozenset[RunState]] = {
    RunState.CREATED: frozenset({RunState.PENDING, RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}),
    RunState.PENDING: frozenset({RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}),
    RunState.RUNNING: frozenset(TERMINAL),
    RunState.COMPLETED: frozenset(),
    RunState.FAILED: frozenset({RunState.PENDING, RunState.RUNNING}),
    RunState.CANCELLED: frozenset({RunState.PENDING, RunState.RUNNING}),
    RunState.TIMEOUT: frozenset({RunState.PENDING, RunState.RUNNING}),
    RunState.PREEMPTED: frozenset({RunState.PENDING, RunState.RUNNING}),
}


class IllegalTransition(RunError):
    pass


def check_transition(old: RunState, new: RunState, run_id: str) -> None:
    if new not in ALLOWED[old]:
        raise IllegalTransition(f"run {run_id} is {old.value}; it cannot become {new.value}")
