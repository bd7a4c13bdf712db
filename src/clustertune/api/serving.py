"""Serving through the API: what the ``serve`` command (and a program) calls.

:func:`serve` serves in this process until Ctrl-C. :func:`submit` serves as a run, with the
launch keys of ``clustertune launch`` (``launch.backend=slurm``...): the server is the run's
command (one process, ``launch.runner=none``), so ``status``, ``logs`` and ``cancel`` work on it as
on any run, and its address is read from the run directory once the port is bound.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.runs.run import Run
from clustertune.serve.engine import Limits
from clustertune.serve.server import API_KEY_ENV, Served, Server, prepare, resolve_api_key
from clustertune.use.load import find_target

__all__ = ["Limits", "Served", "Submitted", "serve", "start", "submit"]


def _require_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UserError(f"serving needs FastAPI and uvicorn ({exc.name} is missing): "
                        "pip install 'clustertune[serve]'") from None


def start(model: str, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          runs_root: str | os.PathLike[str] | None = None, device: str | None = None, dtype: str = "auto",
          template: str | None = None, limits: Limits = Limits(), log_prompts: bool = False) -> Server:
    """A bound server for ``model`` (checked, port taken, nothing loaded yet): call ``run()``."""
    _require_extra()
    engine = prepare(model, runs_root=runs_root, device=device, dtype=dtype, template=template, limits=limits)
    return Server(engine, host, port, api_key=resolve_api_key(api_key), log_prompts=log_prompts)


def serve(model: str, *, on_listening: Callable[[Served], Any] | None = None, **options: Any) -> None:
    """Serve ``model`` until Ctrl-C or SIGTERM (options as :func:`start`)."""
    start(model, **options).run(on_listening)


@dataclass(frozen=True)
class Submitted:
    """A serving run and, once its server listens, where (None if it ended before that)."""

    run: Run
    address: dict[str, Any] | None

    @property
    def base_url(self) -> str | None:
        return self.address["base_url"] if self.address else None

    def tunnel(self, local_port: int = 8000) -> str | None:
        """The ``ssh -L`` line that brings the server to ``localhost:local_port`` of the machine
        it is typed on (the login node, or a laptop that can reach the node)."""
        if not self.address:
            return None
        a = self.address
        to = "127.0.0.1" if a["bound"] in ("127.0.0.1", "localhost", "::1") else a["host"]
        return f"ssh -N -L {local_port}:{to}:{a['port']} {a['node']}"


def _served_path(model: str, runs_root: str | os.PathLike[str] | None) -> str:
    """What the node opens for ``model``: an absolute path (a run's directory or a model's), so
    the name means the same run there as here."""
    target = find_target(model, runs_root)
    if target.classifier:
        raise UserError(f"{target.label} is a sequence classifier: it labels text and has nothing to write; "
                        "serve a causal LM run")
    return str(target.run.paths.root if target.run is not None else target.path)


def submit(model: str, launch_keys: list[str], *, runs_root: str | os.PathLike[str] | None = None,
           host: str = "127.0.0.1", port: int = 0, api_key: str | None = None, device: str | None = None,
           dtype: str = "auto", template: str | None = None, limits: Limits = Limits(), log_prompts: bool = False,
           wait_seconds: float = 600.0, announce: Callable[[str], Any] | None = None,
           cli_command: list[str] | None = None) -> Submitted:
    """Serve ``model`` as a run under ``launch_keys``; returns once its server listens (or the run
    ended, or ``wait_seconds`` passed: a SLURM job may wait in the queue)."""
    # Deferred: launching loads the backends, which the CLI's start-up does without.
    from clustertune.api import launch_command, refreshed

    if api_key is not None:
        raise UserError(f"--api-key with launch keys would be written into the run's files (its command); "
                        f"set {API_KEY_ENV} in the environment instead, which the job inherits")
    keys = {k.split("=", 1)[0].strip(): k.split("=", 1)[1].strip() if "=" in k else "" for k in launch_keys}
    bad = [k for k in keys if k in ("launch.runner", "launch.procs_per_node")]
    if bad:
        raise UserError(f"{', '.join(bad)}: a server is one process per run (launch.runner=none); leave these out")
    if keys.get("launch.backend") != "slurm":
        raise UserError("serving as a run takes launch.backend=slurm (and the job's launch.* keys: partition, "
                        "gpus_per_node, time...); without launch keys `clustertune serve` serves from this process")
    exe = Path(sys.executable).with_name("clustertune")
    command = [str(exe) if exe.is_file() else "clustertune", "serve", _served_path(model, runs_root),
               "--host", host, "--port", str(port), "--dtype", dtype,
               "--max-running", str(limits.running), "--max-waiting", str(limits.waiting),
               "--max-tokens", str(limits.max_tokens)]
    command += (["--device", device] if device else []) + (["--template", template] if template else [])
    command += ["--log-prompts"] if log_prompts else []
    run = launch_command(command, None, ["launch.runner=none", *launch_keys], runs_root_dir=runs_root,
                         command=cli_command, announce=announce)
    deadline = time.monotonic() + wait_seconds
    while True:
        if run.paths.serve_address.is_file():
            try:
                return Submitted(run, json.loads(run.paths.serve_address.read_text(encoding="utf-8")))
            except ValueError:
                pass  # written atomically; a partial read is not possible, but stay safe
        run = refreshed(run)
        if run.state.terminal or time.monotonic() > deadline:
            return Submitted(run, None)
        time.sleep(0.5)
