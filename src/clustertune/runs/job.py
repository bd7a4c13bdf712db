"""What every backend's job offers, and ``wait`` / ``follow`` written once on top of it.

A job is a run's handle on the backend that runs it (a local process group, a SLURM job,
processes on SSH hosts), reattached from ``run.json`` alone. It lives below ``remote/`` and
``launch/`` so both the SSH jobs of ``remote/`` and the launchers of ``launch/`` implement it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

from clustertune.runs.run import Run
from clustertune.runs.state import RunState

# How a launch reports progress to whoever started it (the CLI prints to stderr).
Announce = Callable[[str], None]


@runtime_checkable
class Job(Protocol):
    """One run's job on some backend."""

    run: Run

    def state(self) -> RunState:
        """Ask the backend, record any change in ``run.json``, return the run's state."""
        ...

    def settled(self) -> bool:
        """Whether the backend is done with the job once the run is terminal (a scheduler may
        still hold it, about to requeue it)."""
        ...

    def log_nodes(self, node: int | None) -> list[int | None]:
        """The logs ``read_log`` serves for ``node``: that node's alone when given (an error
        names the nodes there are), else every node's, or ``[None]`` where the run keeps one log
        of its own. Empty while no host has the run yet."""
        ...

    def read_log(self, node: int | None, offset: int) -> bytes:
        """A log (a node's; ``None``: the run's own) from byte ``offset`` on; empty when
        nothing is new."""
        ...

    def cancel(self) -> None:
        """Stop the run; it ends CANCELLED."""
        ...

    def wait(self, timeout: float | None = None) -> RunState:
        """:func:`wait` with the backend's polling interval."""
        ...

    def logs(self, node: int | None = None) -> str:
        """The whole log now (:func:`read_logs`, or the backend's fuller view)."""
        ...


def wait(job: Job, timeout: float | None = None, poll: float = 1.0) -> RunState:
    """Block until the run is terminal and its backend is done with it, or ``timeout`` passes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        state = job.state()
        if state.terminal and job.settled():
            return state
        if deadline is not None and time.monotonic() > deadline:
            return state
        time.sleep(poll)


def read_logs(job: Job, node: int | None = None) -> str:
    """The whole log (each node's lines prefixed ``[node i]`` when there are several)."""
    nodes = job.log_nodes(node)
    if len(nodes) == 1:
        return job.read_log(nodes[0], 0).decode("utf-8", "replace")
    return "".join(f"[node {i}] {line}\n" for i in nodes
                   for line in job.read_log(i, 0).decode("utf-8", "replace").splitlines())


def follow(job: Job, node: int | None = None, poll: float = 1.0) -> Iterator[str]:
    """Log lines as they are written, until the run ends; a line is yielded once complete."""
    nodes = job.log_nodes(node)
    while not nodes:  # not placed yet (being copied to its hosts): nothing to read
        if job.state().terminal:
            return
        time.sleep(poll)
        nodes = job.log_nodes(node)
    offsets: dict[int | None, int] = {i: 0 for i in nodes}
    partial: dict[int | None, bytes] = {i: b"" for i in nodes}
    while True:
        done = job.state().terminal  # first: the last round then reads everything written before
        for i in nodes:
            data = job.read_log(i, offsets[i])
            offsets[i] += len(data)
            *complete, partial[i] = (partial[i] + data).split(b"\n")
            if done and partial[i]:
                complete.append(partial[i])
                partial[i] = b""
            for line in complete:
                text = line.decode("utf-8", "replace")
                yield text if len(nodes) == 1 else f"[node {i}] {text}"
        if done:
            return
        time.sleep(poll)


def read_file_from(path: Path, offset: int) -> bytes:
    """A local log file's bytes from ``offset`` on (empty when it does not exist yet)."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return fh.read()
    except FileNotFoundError:
        return b""
