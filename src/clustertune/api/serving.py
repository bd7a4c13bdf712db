"""Serving through the API: what the ``serve`` command (and a program) calls.

:func:`serve` serves in this process until Ctrl-C. :func:`submit` serves as a run, with the
launch keys of ``clustertune launch`` (``launch.backend=slurm``...): the server is the run's
command (one process, ``launch.runner=none``), so ``status``, ``logs`` and ``cancel`` work on it as
on any run, and its address is read from the run directory once the port is bound.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.api.data import cache_root
from clustertune.api.jobs import refreshed
from clustertune.api.runs import launch_command
from clustertune.api.tinker_proxy import TinkerProxy, rsync_fetcher
from clustertune.calls.host_job import cluster_of
from clustertune.errors import UserError
from clustertune.extras import install_hint
from clustertune.runs.paths import HostRunPaths
from clustertune.remote.transport import ssh_env
from clustertune.runs.run import Run
from clustertune.runs.store import runs_root as default_runs_root
from clustertune.script import RUN_DIR_ENV
from clustertune.serve.host_memory import keep_freed_memory
from clustertune.serve.engine import Limits
from clustertune.serve.listen import ServeError
from clustertune.serve.tinker.service import TinkerService
from clustertune.serve.server import (API_KEY_ENV, DEFAULT_MAX_ADAPTERS, Served, Server, check_options, model_id_of, prepare,
                                       resolve_api_key)
from clustertune.use.load import find_target

__all__ = ["Forward", "Limits", "Served", "Submitted", "forward", "serve", "start", "submit"]


def _require_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UserError(f"serving needs FastAPI and uvicorn ({exc.name} is missing): {install_hint('serve')}") from None


def start(model: str | None, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          runs_root: str | os.PathLike[str] | None = None, device: str | None = None, dtype: str = "auto",
          template: str | None = None, limits: Limits = Limits(), log_prompts: bool = False,
          name: str | None = None, tinker: bool = False, tinker_dir: str | os.PathLike[str] | None = None,
          tinker_save_every: int = 0, adapters: list[str] | None = None,
          max_adapters: int = DEFAULT_MAX_ADAPTERS, check: bool = True) -> Server:
    """A bound server for ``model`` (checked, port taken, nothing loaded yet): call ``run()``.

    A base model also serves its adapter runs, each by its run id: ``adapters`` loaded at start,
    others when first asked for, at most ``max_adapters`` held at once.

    ``tinker``: also answer the Tinker training API under ``/api/v1`` (``model`` None: that API
    alone); its checkpoints go to ``tinker_dir`` (default ``RUNS_ROOT/tinker``, or the run
    directory's ``tinker/`` when the server is a run)."""
    _require_extra()
    keep_freed_memory()  # before any of the server's threads allocates (their arenas)
    if model is None and not tinker:
        raise UserError("name the model to serve (a run id or a model directory), or --tinker for the Tinker "
                        "training API alone")
    engine = None
    if model is not None:
        engine = prepare(model, runs_root=runs_root, device=device, dtype=dtype, template=template, limits=limits,
                         name=name, adapters=adapters, max_adapters=max_adapters, check=check)
    elif adapters:
        raise UserError("--adapters: name the base model to serve them on")
    service = None
    if tinker:
        service = tinker_service(runs_root=runs_root, device=device, dtype=dtype, tinker_dir=tinker_dir,
                                 save_every=tinker_save_every)
    return Server(engine, host, port, api_key=resolve_api_key(api_key), log_prompts=log_prompts, tinker=service)


def tinker_service(*, runs_root: str | os.PathLike[str] | None, device: str | None, dtype: str,
                   tinker_dir: str | os.PathLike[str] | None, save_every: int = 0) -> Any:
    try:
        import tinker  # noqa: F401
    except ImportError:
        raise UserError(f"--tinker needs the tinker SDK (its protobuf schema): {install_hint('tinker')}") from None
    if tinker_dir is None:
        run_dir = os.environ.get(RUN_DIR_ENV)
        tinker_dir = Path(run_dir) / "tinker" if run_dir else default_runs_root(runs_root) / "tinker"
    if save_every < 0:
        raise UserError(f"--tinker-save-every {save_every}: a number of optimizer steps, or 0 for none")
    check_options(dtype=dtype)  # bases load when clients ask: a wrong --dtype is refused now
    try:
        return TinkerService(Path(tinker_dir), runs_root=str(runs_root) if runs_root is not None else None,
                             device=device, dtype=dtype, save_every=save_every)
    except OSError as exc:  # a file there, no permission: the directory cannot be made (exit 2, not a traceback)
        raise ServeError(f"--tinker-dir {tinker_dir}: cannot hold the Tinker checkpoints ({exc.strerror or exc}); "
                         "give a directory this user can write, or leave it out for RUNS_ROOT/tinker") from None


def serve(model: str, *, on_listening: Callable[[Served], Any] | None = None,
          on_ready: Callable[[Served], Any] | None = None, **options: Any) -> None:
    """Serve ``model`` until Ctrl-C or SIGTERM (options as :func:`start`): ``on_listening`` once
    the port is bound, ``on_ready`` once the model has loaded. A model that fails to load stops
    the server with :class:`~clustertune.serve.listen.ModelLoadError` (exit 1)."""
    start(model, **options).run(on_listening, on_ready)


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
    _servable(target)
    return str(target.run.paths.root if target.run is not None else target.path)


def submit(model: str | None, launch_keys: list[str], *, runs_root: str | os.PathLike[str] | None = None,
           host: str = "127.0.0.1", port: int = 0, api_key: str | None = None, device: str | None = None,
           dtype: str = "auto", template: str | None = None, limits: Limits = Limits(), log_prompts: bool = False,
           wait_seconds: float = 600.0, announce: Callable[[str], Any] | None = None,
           cli_command: list[str] | None = None, tinker: bool = False, tinker_save_every: int = 0,
           check: bool = True) -> Submitted:
    """Serve ``model`` as a run under ``launch_keys``; returns once its server listens (or the run
    ended, or ``wait_seconds`` passed: a SLURM job may wait in the queue).

    On SLURM the job's node opens the model where it is (the cluster's filesystem). On SSH hosts
    (``launch.backend=ssh launch.cluster=NAME``) the model directory travels as a content-addressed
    snapshot (``launch.files``: sent once per host and content), and the server starts in the
    run's directory there; :func:`forward` brings its port here."""
    if api_key is not None:
        raise UserError(f"--api-key with launch keys would be written into the run's files (its command); "
                        f"set {API_KEY_ENV} in the environment instead, which the job inherits")
    keys = {k.split("=", 1)[0].strip(): k.split("=", 1)[1].strip() if "=" in k else "" for k in launch_keys}
    bad = [k for k in keys if k in ("launch.runner", "launch.procs_per_node", "launch.files", "launch.sync_workdir")]
    if bad:
        raise UserError(f"{', '.join(bad)}: a server is one process per run (launch.runner=none) and takes the "
                        "model it is given; leave these out")
    backend = keys.get("launch.backend")
    if backend not in ("slurm", "ssh"):
        raise UserError("serving as a run takes launch.backend=slurm (and the job's launch.* keys: partition, "
                        "gpus_per_node, time...) or launch.backend=ssh launch.cluster=NAME; without launch keys "
                        "`clustertune serve` serves from this process")
    check_options(dtype=dtype, template=template, max_body=limits.max_body)
    options = ["--host", host, "--port", str(port), "--dtype", dtype,
               "--max-running", str(limits.running), "--max-waiting", str(limits.waiting),
               "--max-tokens", str(limits.max_tokens)]
    options += ["--max-body", str(limits.max_body)] if limits.max_body is not None else []
    options += (["--device", device] if device else []) + (["--template", template] if template else [])
    options += ["--log-prompts"] if log_prompts else []
    options += [] if check else ["--no-check"]
    if tinker:
        # The Tinker API alone, its checkpoints in the run directory (the server finds it in
        # $CLUSTERTUNE_RUN_DIR); the bases are named by the clients, as the host knows them.
        if model is not None:
            raise UserError("--tinker as a run serves the Tinker API alone: leave the model out")
        tail = ["serve", "--tinker", "--host", host, "--port", str(port), "--dtype", dtype,
                "--tinker-save-every", str(tinker_save_every), *(["--device", device] if device else [])]
        if backend == "ssh":
            command = ["python", "-m", "clustertune.cli.main", *tail]
            launch_keys = [*launch_keys, "launch.sync_workdir=false"]
        else:
            command = [_clustertune_here(), *tail]
    elif model is None:
        raise UserError("name the model to serve")
    elif backend == "ssh":
        target = find_target(model, runs_root)
        _servable(target)
        if target.adapter:
            raise UserError(f"{target.label} is an adapter: on SSH hosts serve a merged copy "
                            f"(`clustertune export {model} --merge --to OUT`, then `clustertune serve OUT ...`)")
        # The env's Python runs clustertune's code snapshot there; {run_dir} is the host's run directory.
        command = ["python", "-m", "clustertune.cli.main", "serve", f"{{run_dir}}/files/{target.path.name}",
                   "--name", model_id_of(target), *options]
        launch_keys = [*launch_keys, "launch.sync_workdir=false", f"launch.files={json.dumps([str(target.path)])}"]
    else:
        command = [_clustertune_here(), "serve", _served_path(model, runs_root), *options]
    run = launch_command(command, None, ["launch.runner=none", *launch_keys], runs_root_dir=runs_root,
                         command=cli_command, announce=announce, wait=False)
    deadline = time.monotonic() + wait_seconds
    while True:
        address = _address(run)
        if address is not None:
            return Submitted(run, address)
        run = refreshed(run)
        if run.state.terminal or time.monotonic() > deadline:
            return Submitted(run, None)
        time.sleep(0.5)


def _clustertune_here() -> str:
    """The ``clustertune`` a SLURM job runs: the one beside this Python (the same environment, on
    the cluster's shared filesystem), else whichever is first on the job's PATH."""
    exe = Path(sys.executable).with_name("clustertune")
    return str(exe) if exe.is_file() else "clustertune"


def _servable(target: Any) -> None:
    if target.classifier:
        raise UserError(f"{target.label} is a sequence classifier: it labels text and has nothing to write; "
                        "serve a causal LM run")


def _address(run: Run) -> dict[str, Any] | None:
    """Where a serving run's server listens, once it wrote it: in the run directory here (SLURM),
    or in the host's copy of it (SSH)."""
    text = None
    if run.info.backend == "ssh":
        node = int((run.info.remote or {}).get("nodes", [0])[0])
        cluster = cluster_of(run)
        where = posixpath.join(HostRunPaths(cluster.root(node), run.id).run_dir, run.paths.serve_address.name)
        r = cluster.conn(node).run(["cat", where])
        if r.rc == 0:
            text = r.text
    elif run.paths.serve_address.is_file():
        text = run.paths.serve_address.read_text(encoding="utf-8")
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None  # written atomically; stay safe all the same


@dataclass
class Forward:
    """An ``ssh -N -L`` process bringing a server on an SSH host to ``127.0.0.1:local_port`` here."""

    process: Any
    local_port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/v1"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a stuck ssh is killed
                self.process.kill()


def tinker_forward(sub: Submitted, local_port: int = 0) -> tuple[Forward, Any]:
    """A Tinker server on an SSH host brought to ``127.0.0.1:local_port`` here: the ``ssh -L``
    forward on a free port and the proxy in front of it that copies each base's tokenizer here
    (:mod:`~clustertune.api.tinker_proxy`). Close both when done."""
    fwd = forward(sub, 0)
    node = int((sub.run.info.remote or {}).get("nodes", [0])[0])
    conn = cluster_of(sub.run).conn(node)
    try:
        proxy = TinkerProxy(f"http://127.0.0.1:{fwd.local_port}", rsync_fetcher(conn, cache_root()),
                            local_port).start()
    except UserError:  # the port cannot be taken
        fwd.close()
        raise
    return fwd, proxy


def tinker_follow(sub: Submitted, local_port: int = 0) -> Any:
    """A Tinker server running as a SLURM job, at ``127.0.0.1:local_port`` here for as long as
    the job lives: the proxy reads the job's address from the run directory (the cluster's
    shared filesystem) and reads it again when the job comes back elsewhere after a requeue.
    Tokenizers are where the server reports them (the same filesystem)."""
    def where() -> str | None:
        a = _address(sub.run)
        return f"http://{a['host']}:{a['port']}" if a else None

    return TinkerProxy(where, Path, local_port).start()


def forward(sub: Submitted, local_port: int = 0, timeout: float = 30.0) -> Forward:
    """The server of an SSH serving run, forwarded to ``local_port`` here (0: any free one) over
    the host's ssh settings (key, known hosts, jump hosts); returns once the port answers."""
    import socket
    import subprocess

    if sub.address is None or sub.run.info.backend != "ssh":
        raise UserError(f"run {sub.run.id} is not serving on an SSH host")
    if local_port == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            local_port = probe.getsockname()[1]
    node = int((sub.run.info.remote or {}).get("nodes", [0])[0])
    conn = cluster_of(sub.run).conn(node)
    a = sub.address
    to = "127.0.0.1" if a["bound"] in ("127.0.0.1", "localhost", "::1", "0.0.0.0") else a["host"]
    # Its own connection, not the shared master: the forward ends with this process.
    argv = [*conn.plain_ssh(), "-o", "ExitOnForwardFailure=yes", "-N",
            "-L", f"127.0.0.1:{local_port}:{to}:{a['port']}", "--", conn.host.address]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=ssh_env())
    fwd = Forward(proc, local_port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
            raise UserError(f"could not forward 127.0.0.1:{local_port} to the server of run {sub.run.id}: "
                            f"{err[-500:] or f'ssh exited {proc.returncode}'} (another --port?)")
        try:
            with socket.create_connection(("127.0.0.1", local_port), timeout=1):
                return fwd
        except OSError:
            time.sleep(0.2)
    fwd.close()
    raise UserError(f"the forward of 127.0.0.1:{local_port} to run {sub.run.id}'s server did not open in {timeout:.0f} s")
