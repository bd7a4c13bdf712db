"""The local backend's job: a training process on this host, followed by its pid."""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass

from clustertune.errors import RunError
from clustertune.launch.base import register
from clustertune.runs.run import Run, pid_alive
from clustertune.runs.state import RunState


@dataclass
class LocalJob:
    run: Run

    def _attempt(self) -> dict:
        return self.run.attempts[-1] if self.run.attempts else {}

    def state(self) -> RunState:
        return self.run.reload().reconcile().state

    def wait(self, timeout: float | None = None) -> RunState:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.state().terminal:
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return self.run.state

    def logs(self, node: int | None = None) -> str:
        if node not in (None, 0):
            raise RunError(f"run {self.run.id} ran on one host; it has no node {node}")
        log = self.run.paths.log
        return log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""

    def cancel(self) -> None:
        state = self.state()
        if state.terminal:
            raise RunError(f"run {self.run.id} is already {state.value}; nothing to cancel")
        att = self._attempt()
        if att.get("host") != socket.gethostname():
            raise RunError(f"run {self.run.id} runs on host {att.get('host')}; cancel it there")
        pid = int(att.get("pid") or 0)
        if pid and pid_alive(pid):
            # SIGINT: the training process records CANCELLED itself on KeyboardInterrupt.
            os.kill(pid, signal.SIGINT)
            for _ in range(100):
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        self.run.reload()
        if not self.run.state.terminal:
            self.run.transition(RunState.CANCELLED, reason="cancelled by `clustertune cancel`")


class LocalLauncher:
    name = "local"

    def job(self, run: Run) -> LocalJob:
        return LocalJob(run)


register("local", LocalLauncher)
