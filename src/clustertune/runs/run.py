"""A Run: id, paths, state and attempts, persisted in ``run.json`` (written atomically).

Only this module changes a run's state, and only along the edges in :mod:`state`.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clustertune.fsutil import atomic_write_json
from clustertune.runs.paths import RunPaths
from clustertune.runs.state import RunState, check_transition


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(name: str) -> str:
    """``<name>-<UTC timestamp>-<4 hex>``: sortable by time, unique, safe in paths and shells."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:40] or "run"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("clustertune", "torch", "transformers", "accelerate", "datasets", "tokenizers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is not running our code any more.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


@dataclass
class Run:
    """One run directory and its ``run.json``."""

    paths: RunPaths
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.paths.run_id

    @property
    def state(self) -> RunState:
        return RunState(self.info["state"])

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return self.info.setdefault("attempts", [])

    # -- persistence -------------------------------------------------------------------------

    @classmethod
    def create(cls, runs_root: Path, name: str, task: str, recipe_yaml: str, command: list[str],
               backend: str = "local") -> Run:
        runs_root.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            root = runs_root / new_run_id(name)
            try:
                root.mkdir()
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - 10 collisions of a 16-bit suffix within one second
            raise RuntimeError("could not allocate a unique run id")
        paths = RunPaths(root)
        paths.logs_dir.mkdir()
        paths.recipe.write_text(recipe_yaml, encoding="utf-8")
        run = cls(paths, {
            "id": root.name,
            "name": name,
            "task": task,
            "state": RunState.CREATED.value,
            "created_at": now_iso(),
            "host": socket.gethostname(),
            "command": command,
            "cwd": os.getcwd(),
            "git_commit": _git_commit(Path.cwd()),
            "versions": _versions(),
            "backend": backend,
            "attempts": [],
        })
        run.save()
        return run

    @classmethod
    def load(cls, root: Path) -> Run:
        paths = RunPaths(root)
        info = json.loads(paths.run_json.read_text(encoding="utf-8"))
        return cls(paths, info)

    def save(self) -> None:
        atomic_write_json(self.paths.run_json, self.info)

    def reload(self) -> Run:
        self.info = json.loads(self.paths.run_json.read_text(encoding="utf-8"))
        return self

    # -- state changes -----------------------------------------------------------------------

    def transition(self, new: RunState, reason: str | None = None, traceback_text: str | None = None) -> None:
        check_transition(self.state, new, self.id)
        self.info["state"] = new.value
        self.info["updated_at"] = now_iso()
        if self.attempts and self.attempts[-1].get("ended_at") is None and new.terminal:
            att = self.attempts[-1]
            att["ended_at"] = now_iso()
            att["state"] = new.value
            if reason:
                att["reason"] = reason
            if traceback_text:
                att["traceback"] = traceback_text
        if reason and new.terminal:
            self.info["reason"] = reason
        elif not new.terminal:
            self.info.pop("reason", None)
        self.save()

    def start_attempt(self, resumed_from: str | None = None, job_id: str | None = None,
                      state: RunState = RunState.RUNNING) -> dict[str, Any]:
        """Open a new attempt and move to ``state`` (RUNNING here, PENDING when a scheduler
        queued it). ``job_id`` is the backend's handle (default: this process's pid)."""
        att = {
            "n": len(self.attempts) + 1,
            "backend": self.info.get("backend", "local"),
            "job_id": job_id or str(os.getpid()),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": now_iso(),
            "ended_at": None,
            "state": state.value,
            "argv": list(sys.argv),
        }
        if resumed_from:
            att["resumed_from"] = resumed_from
        self.attempts.append(att)
        self.transition(state)
        return att

    def reconcile(self) -> Run:
        """A RUNNING local run whose process is gone was killed: record it as FAILED."""
        if self.state is RunState.RUNNING and self.attempts and self.info.get("backend", "local") == "local":
            att = self.attempts[-1]
            if att.get("host") == socket.gethostname() and att.get("pid") and not pid_alive(int(att["pid"])):
                self.transition(RunState.FAILED, reason="the training process ended without reporting (killed?)")
        return self
