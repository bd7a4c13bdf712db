"""A Run: id, paths, state and attempts, persisted in ``run.json`` (written atomically).

Only this module changes a run's state, and only along the edges in :mod:`state`.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clustertune.errors import RunError
from clustertune.extras import installed_version
from clustertune.fsutil import atomic_write_json
from clustertune.runs.metrics_file import read_metrics
from clustertune.runs.paths import RunPaths
from clustertune.runs.records import Attempt, RunInfo
from clustertune.runs.state import RESUMABLE, RunState, check_transition

log = logging.getLogger("clustertune")


# Why a run ended CANCELLED, as run.json records it: a cancel asked for by `clustertune cancel`
# (it writes the run's cancel request first), or Ctrl-C in the process that trains.
CANCELLED_BY_USER = "cancelled by user (`clustertune cancel`)"
INTERRUPTED = "interrupted (Ctrl-C / SIGINT)"


def interrupt_reason(paths: RunPaths) -> str:
    """The reason of a run whose training process got SIGINT: a cancel, or Ctrl-C."""
    return CANCELLED_BY_USER if paths.cancel_request.is_file() else INTERRUPTED


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def created_now() -> str:
    """When a run is made, to the microsecond: runs are ordered by it (``last``, the newest of a
    name), and a sweep's trials or a short run and the next are made within one second."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def new_run_id(name: str) -> str:
    """``<name>-<UTC timestamp>-<4 hex>``: sortable by time, unique, safe in paths and shells."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:40] or "run"
    return f"{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("clustertune", "torch", "transformers", "accelerate", "datasets", "tokenizers"):
        out[pkg] = installed_version(pkg) or "not installed"
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


def check_runs_root(runs_root: Path) -> None:
    """RunError unless run directories can be made under ``runs_root``. Nothing is left behind:
    where the root does not exist yet, its nearest existing parent is probed instead (a directory
    is made there and removed again, to be sure whatever the permission bits say)."""
    probe = runs_root
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(probe))
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=probe))
    except OSError as exc:
        raise RunError(f"runs root {runs_root} cannot hold runs ({exc.strerror}: {exc.filename or runs_root}); pass "
                       "--runs-root DIR (or set $CLUSTERTUNE_RUNS or tracking.runs_root) to a directory you can write") from None


@dataclass
class Run:
    """One run directory and its ``run.json``; the only code that changes a run's state.

    Every change goes through a method here, along the edges of
    :data:`~clustertune.runs.state.ALLOWED`, and is saved at once (atomically)."""

    paths: RunPaths
    info: RunInfo

    @property
    def id(self) -> str:
        return self.paths.run_id

    @property
    def state(self) -> RunState:
        return self.info.state

    @property
    def attempts(self) -> list[Attempt]:
        return self.info.attempts

    @property
    def last_attempt(self) -> Attempt | None:
        return self.info.attempts[-1] if self.info.attempts else None

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """The rows of ``metrics.jsonl`` as they are now: ``kind`` ``train`` (step, loss, lr,
        grad_norm, tokens_per_s...) and ``eval`` (step, eval_loss, eval_perplexity...)."""
        return read_metrics(self.paths.metrics)

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``, the final figures (steps, final_eval, tokens_per_s, evals...);
        empty while the run has not finished."""
        try:
            return dict(json.loads(self.paths.summary.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RunError(f"cannot read {self.paths.summary}: {exc}") from exc

    # -- persistence -------------------------------------------------------------------------

    @classmethod
    def create(cls, runs_root: Path, name: str, task: str, recipe_yaml: str | None, command: list[str],
               backend: str = "local", run_id: str | None = None) -> Run:
        """A new run directory; ``recipe_yaml`` None: no recipe (a user's own command).
        ``run_id``: the id its launch plan was made for (:func:`new_run_id`), else a new one."""
        check_runs_root(runs_root)
        runs_root.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            root = runs_root / (run_id or new_run_id(name))
            try:
                root.mkdir()
                break
            except FileExistsError:
                if run_id is not None:  # pragma: no cover - a second launch under the same fresh id
                    raise RuntimeError(f"run directory {root} exists already") from None
                continue
        else:  # pragma: no cover - 10 collisions of a 16-bit suffix within one second
            raise RuntimeError("could not allocate a unique run id")
        paths = RunPaths(root)
        paths.logs_dir.mkdir()
        if recipe_yaml is not None:
            paths.recipe.write_text(recipe_yaml, encoding="utf-8")
        run = cls(paths, RunInfo(
            id=root.name, name=name, task=task, state=RunState.CREATED, created_at=created_now(),
            host=socket.gethostname(), command=command, cwd=os.getcwd(), git_commit=_git_commit(Path.cwd()),
            versions=_versions(), backend=backend,
        ))
        run.save()
        return run

    @classmethod
    def load(cls, root: Path) -> Run:
        paths = RunPaths(root)
        return cls(paths, _read_info(paths))

    def save(self) -> None:
        atomic_write_json(self.paths.run_json, self.info.to_json())

    def reload(self) -> Run:
        self.info = _read_info(self.paths)
        return self

    # -- state changes -----------------------------------------------------------------------

    def transition(self, new: RunState, reason: str | None = None, traceback_text: str | None = None) -> None:
        check_transition(self.state, new, self.id)
        self.info.state = new
        self.info.updated_at = now_iso()
        att = self.last_attempt
        if att is not None and att.open:
            att.state = new  # the open attempt follows the run: PENDING, RUNNING, then how it ended
            if new.terminal:
                att.ended_at = now_iso()
                if reason:
                    att.reason = reason
                if traceback_text:
                    att.traceback = traceback_text
        if reason and new.terminal:
            self.info.reason = reason
        elif not new.terminal:
            self.info.reason = None
        self.save()

    def start_attempt(self, resumed_from: str | None = None, job_id: str | None = None,
                      state: RunState = RunState.RUNNING) -> Attempt:
        """Open a new attempt and move to ``state`` (RUNNING here, PENDING when a scheduler
        queued it). ``job_id`` is the backend's handle (default: this process's pid)."""
        att = Attempt(
            n=len(self.attempts) + 1, backend=self.info.backend, job_id=job_id or str(os.getpid()),
            host=socket.gethostname(), pid=os.getpid(), started_at=now_iso(), state=state,
            argv=list(sys.argv), resumed_from=resumed_from or None,
        )
        self.attempts.append(att)
        self.transition(state)
        return att

    def node_started(self, job_id: str | None, resumed_from: str | None) -> None:
        """The node side's rank 0 is training: the attempt the launcher opened (PENDING or
        RUNNING) becomes RUNNING, or a new attempt opens (a requeue, a restart)."""
        att = self.last_attempt
        if att is not None and att.open and self.state in (RunState.PENDING, RunState.RUNNING):
            if resumed_from is not None:
                att.resumed_from = resumed_from
            if self.state is RunState.PENDING:
                self.transition(RunState.RUNNING)
            else:
                att.state = RunState.RUNNING
                self.save()
        else:
            self.start_attempt(resumed_from=resumed_from, job_id=job_id)

    def record_attempt(self, **fields: Any) -> None:
        """Backend details of the current attempt (its job id once known, torchrun's pid)."""
        att = self.last_attempt
        if att is None:
            raise RunError(f"run {self.id} has no attempt to record {sorted(fields)} on")
        for key, value in fields.items():
            setattr(att, key, value)
        self.save()

    def set_files(self, files: list[dict[str, Any]]) -> None:
        """What the nodes got of the local paths the recipe names (the first launch's record)."""
        self.info.files = files
        self.save()

    def set_sweep(self, sweep_id: str, index: int, overrides: dict[str, str]) -> None:
        """This run is trial ``index`` of sweep ``sweep_id``, with those swept values."""
        self.info.sweep = {"id": sweep_id, "trial": index, "overrides": dict(overrides)}
        self.save()

    def set_backend(self, backend: str) -> None:
        self.info.backend = backend
        self.save()

    def set_remote(self, remote: dict[str, Any], backend: str | None = None) -> None:
        """Where on an SSH cluster this run lives (replacing what an earlier attempt recorded)."""
        self.info.remote = remote
        if backend is not None:
            self.info.backend = backend
        self.save()

    def update_remote(self, **fields: Any) -> None:
        if self.info.remote is None:
            raise RunError(f"run {self.id} has no 'remote' section in {self.paths.run_json}")
        self.info.remote = {**self.info.remote, **fields}
        self.save()

    def explain(self, more: str, first: bool = False) -> None:
        """Add to the reason the run ended (a log tail the node side could not see); ``first``
        puts it in front (the cause, when the recorded reason is only its consequence)."""
        if self.info.reason:
            more = f"{more} {self.info.reason}" if first else f"{self.info.reason}\n{more}"
        self.info.reason = more
        self.save()

    def check_resumable(self) -> None:
        """The one rule for ``--resume``: a run that stopped part-way (failed, cancelled, timed
        out, preempted) or never started continues; a finished or running one does not."""
        if self.state is RunState.COMPLETED:
            raise RunError(f"run {self.id} already COMPLETED; start a new run instead of --resume")
        if self.state is RunState.RUNNING:
            att = self.last_attempt
            where = f"pid {att.pid} on {att.host}" if att else "no attempt recorded"
            raise RunError(f"run {self.id} is still RUNNING ({where}); it cannot be resumed twice")
        if self.state not in RESUMABLE and self.state is not RunState.CREATED:
            raise RunError(f"run {self.id} is {self.state.value}; only failed, cancelled or preempted runs resume")

    def reconcile(self) -> Run:
        """A RUNNING local run whose process is gone was killed: record it as FAILED."""
        att = self.last_attempt
        if self.state is RunState.RUNNING and att is not None and self.info.backend == "local":
            if att.host == socket.gethostname() and att.pid and not pid_alive(att.pid):
                self.record_end(RunState.FAILED, reason="the training process ended without reporting (killed?)")
        return self

    def record_end(self, new: RunState, reason: str | None = None, traceback_text: str | None = None) -> bool:
        """:meth:`transition`, for paths that are already failing: when run.json cannot be
        written (a full disk) the state changes in memory only, with a warning; True if saved."""
        try:
            self.transition(new, reason=reason, traceback_text=traceback_text)
        except OSError as exc:
            log.warning("run %s: could not record %s in %s: %s", self.id, new.value, self.paths.run_json,
                        exc.strerror or exc)
            return False
        return True


def _read_info(paths: RunPaths) -> RunInfo:
    try:
        raw = json.loads(paths.run_json.read_text(encoding="utf-8"))
        return RunInfo.model_validate(raw)
    except OSError as exc:
        raise RunError(f"cannot read {paths.run_json}: {exc.strerror or exc}") from exc
    except (ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise RunError(f"{paths.run_json} is not a run record clustertune can read ({first}); "
                       "was it edited by hand? Remove the run directory if it is damaged") from exc
