"""Start a server: bind the port first, answer ``/health`` with 503 while the model loads, then serve.

What is served is named as everywhere else (a run id, prefix or name, ``last``, a run or model
directory; an adapter run is served on its base). It is checked before the port is bound, with
every option that can be checked without loading the model (``--dtype``, ``--template``,
``--device``, the limits), so a name or an option that means nothing is an error with exit 2, not
a server that fails later. A model that fails to load all the same stops the server: :meth:`Server.run`
raises :class:`ModelLoadError` (exit 1) and nothing is ever announced as served.
"""

from __future__ import annotations

import dataclasses

import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune import startup
from clustertune.errors import UserError
from clustertune.fsutil import atomic_write_json
from clustertune.runs.library_logs import libraries_quiet
from clustertune.runs.paths import RunPaths
from clustertune.runs.state import RunState
from clustertune.runs.store import list_runs
from clustertune.script import RUN_DIR_ENV
from clustertune.serve.adapters import AdapterRef, AdapterSet
from clustertune.serve.engine import Engine, Limits
from clustertune.serve.protocol import ApiError
from clustertune.serve.listen import ModelLoadError, ServeError, bind
from clustertune.use.fidelity import check_served
from clustertune.use.generate import Generator, resolve_chat_template
from clustertune.use.load import (DTYPES, Loaded, Target, adapter_base, find_target, load_model_for,
                                  load_tokenizer_for, pick_device)

API_KEY_ENV = "CLUSTERTUNE_API_KEY"
TINKER_ONLY = "tinker"  # the served name of a server without a model (the Tinker API alone)
DEFAULT_MAX_ADAPTERS = 8  # adapters held loaded at once: each is a few MB of LoRA weights


@dataclass(frozen=True)
class Served:
    """What a started server serves and where."""

    model_id: str
    host: str
    port: int
    # What the check against the trained model found (use/fidelity.py), once it has loaded:
    # None where it was not run (--no-check) or had nothing to compare.
    checked: str | None = None

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        """What the tinker SDK takes as ``base_url`` (it adds ``/api/v1`` itself)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def model_id_of(target: Target) -> str:
    return target.run.id if target.run is not None else target.path.name


def prepare(ref: str, *, runs_root: str | os.PathLike[str] | None = None, device: str | None = None,
            dtype: str = "auto", template: str | None = None, merge: bool = False,
            limits: Limits = Limits(), name: str | None = None, adapters: list[str] | None = None,
            max_adapters: int = DEFAULT_MAX_ADAPTERS, check: bool = True) -> Engine:
    """The engine for ``ref`` (checked now; the model loads when :meth:`Engine.load` runs);
    ``name``: its id in ``/v1/models`` (default: the run id, or the directory's name). ``check``:
    once loaded, where its dtype, a merge or ``template`` could make it answer otherwise than it
    trained, it is compared with the trained model on held-out prompts (use/fidelity.py) and not
    served when it differs.

    A base (a model that is not itself an adapter run) also serves its adapter runs, each by its
    run id: ``adapters`` (runs or adapter directories) are loaded at start, any other adapter run
    of the base when first asked for; at most ``max_adapters`` are held loaded
    (serve/adapters.py)."""
    if limits.running < 1 or limits.waiting < 0 or limits.max_tokens < 1:
        raise ServeError(f"--max-running {limits.running}, --max-waiting {limits.waiting}, --max-tokens "
                         f"{limits.max_tokens}: running and max-tokens must be at least 1, waiting at least 0")
    check_options(dtype=dtype, template=template, max_body=limits.max_body)
    target = find_target(ref, runs_root)
    if target.classifier:
        raise ServeError(f"{target.label} is a sequence classifier: it labels text and has nothing to write; "
                         "serve a causal LM run")
    dev = pick_device(device)
    served = name or model_id_of(target)
    adapter_set = _adapters_of(target, served, adapters or [], max_adapters, runs_root)

    def load() -> Generator:
        tokenizer = load_tokenizer_for(target)
        model = load_model_for(target, device=dev, dtype=dtype, merge=merge)
        gen = Generator(Loaded(target=target, model=model, tokenizer=tokenizer, device=dev), template=template)
        if check:
            found = check_served(target, gen, merged=merge and target.adapter)
            if found is not None and not found.passed:
                raise ServeError(f"{found.artifact} does not answer as {target.label} does, so it is not served "
                                 f"({found.summary()}):\n  - " + "\n  - ".join(found.differences)
                                 + "\n(--no-check serves it anyway)")
            engine.fidelity = found
        return gen

    engine = Engine(load, served, limits, adapter_set)
    return engine



def _adapters_of(base: Target, served: str, refs: list[str], max_adapters: int,
                 runs_root: str | os.PathLike[str] | None) -> AdapterSet | None:
    """The adapters ``base`` serves (None where it is an adapter run or a checkpoint itself: it
    serves only what it is), each of ``refs`` checked now."""
    if max_adapters < 1:
        raise ServeError(f"--max-adapters {max_adapters}: how many adapters are held loaded at once; at least 1")
    if base.adapter or base.step is not None:
        if refs:
            raise ServeError(f"--adapters: {base.label} is " + ("an adapter run" if base.adapter else "a checkpoint")
                             + "; serve the base model it was trained from, with --adapters naming the adapter runs")
        return None
    listed: dict[str, AdapterRef] = {}
    for ref in refs:
        found = _adapter_ref(find_target(ref, runs_root), base)
        if isinstance(found, str):
            raise ServeError(f"--adapters {ref}: {found}")
        if found.id == served or found.id in listed:
            raise ServeError(f"--adapters {ref}: {found.id!r} is named twice (or is the base's own id)")
        listed[found.id] = found
    if len(listed) > max_adapters:
        raise ServeError(f"--adapters names {len(listed)} adapters and --max-adapters is {max_adapters}: raise it to "
                         f"{len(listed)}, or name fewer (the others load when first asked for)")

    def lookup(model_id: str) -> AdapterRef | None:
        """An adapter run named by its exact id after the server started (a prefix or a run's name
        could pick another run than the client meant)."""
        try:
            target = find_target(model_id, runs_root)
        except (UserError, OSError):
            return None
        if target.run is None or target.run.id != model_id:
            return None
        found = _adapter_ref(target, base)
        if isinstance(found, str):
            raise ApiError(404, f"model {model_id!r} is not served here: {found}", param="model",
                           code="model_not_found")
        return found

    def discover() -> list[str]:
        """Every finished adapter run of the base under the runs root, by id (for /v1/models)."""
        found = []
        for run in list_runs(runs_root):
            config = run.paths.model / "adapter_config.json"
            if run.state is RunState.COMPLETED and config.is_file():
                try:
                    if _base_of(run.paths.model, base) is None:
                        found.append(run.id)
                except UserError:  # an unreadable config: not one to offer
                    continue
        return found

    return AdapterSet(list(listed.values()), max_adapters, lookup, discover)


def _adapter_ref(target: Target, base: Target) -> AdapterRef | str:
    """``target`` as an adapter of ``base``, or why it is not one."""
    if not target.adapter or target.step is not None:
        return f"{target.label} is not an adapter run (a LoRA, QLoRA or DoRA run's final model)"
    if target.classifier:
        return f"{target.label} is a sequence classifier's adapter: it labels text and has nothing to write"
    other = _base_of(target.path, base)
    if other is not None:
        return f"{target.label} is an adapter of {other}, not of the served base {base.path}"
    return AdapterRef(id=model_id_of(target), path=target.path, target=target)


def _base_of(adapter_dir: Path, base: Target) -> str | None:
    """None where the adapter in ``adapter_dir`` was trained on ``base``, else the base it names."""
    trained_on = adapter_base(adapter_dir)
    return None if Path(trained_on).expanduser().resolve() == base.path.resolve() else trained_on


def check_options(*, dtype: str, template: str | None = None, max_body: int | None = None) -> None:
    """The serving options that can be checked before anything loads (exit 2 when wrong)."""
    if dtype not in DTYPES:
        raise ServeError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    if template is not None:
        resolve_chat_template(template, None)  # a built-in's name, or a Jinja file that parses
    if max_body is not None and max_body < 1:
        raise ServeError(f"--max-body {max_body}: the largest request body in bytes (leave it out for a size "
                         "from the model's context)")


class Server:
    """A bound server for ``engine``: :meth:`run` blocks until :meth:`stop` (or Ctrl-C / SIGTERM)."""

    def __init__(self, engine: Engine | None, host: str = "127.0.0.1", port: int = 8000, *,
                 api_key: str | None = None, log_prompts: bool = False, tinker: Any = None):
        import uvicorn

        # FastAPI and uvicorn load only when a server starts: the CLI starts without them.
        from clustertune.serve.app import make_app

        if api_key is not None and not api_key.strip():
            raise ServeError(f"--api-key (or {API_KEY_ENV}) is empty: give a key, or leave both unset to serve "
                             "without one")
        self.engine = engine
        self.sock = bind(host, port)
        bound = self.sock.getsockname()
        self.tinker = tinker
        if tinker is not None and engine is not None:
            # The model's loader thread and the Tinker worker would otherwise be the first to
            # import transformers' lazy modules at the same moment, and one of them gets a half-
            # initialised module ("cannot import name AutoModelForCausalLM"): import them here, once.
            import peft  # noqa: F401
            from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401
        self.served = Served(engine.model_id if engine is not None else TINKER_ONLY, host, int(bound[1]))
        app = make_app(engine, api_key=api_key, log_prompts=log_prompts, tinker=tinker)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=5)
        self._uvicorn = _uvicorn_server()(config)
        self._done_loading = threading.Event()
        self._on_ready: Callable[[Served], Any] | None = None
        self._loader = threading.Thread(target=self._load, name="serve-load", daemon=True)

    def _load(self) -> None:
        try:
            if self.engine is not None:
                # What the libraries print while the model and its adapters load (bitsandbytes'
                # missing CPU kernels when PEFT imports it, transformers' notices) is nothing a
                # user of the server can act on: kept off the terminal (--debug shows it).
                with libraries_quiet():
                    self.engine.load()
        finally:
            startup.release()  # loaded: the first requests do not wait for the start's one collection
            self._done_loading.set()
        if self.engine is not None and self.engine.failed is not None:
            # Nothing this server could answer would work: stop it, and run() says why.
            self._uvicorn.should_exit = True
        else:
            if self.engine is not None and self.engine.fidelity is not None:
                self.served = dataclasses.replace(self.served, checked=self.engine.fidelity.summary())
            if self._on_ready is not None:
                self._on_ready(self.served)

    def run(self, on_listening: Callable[[Served], Any] | None = None,
            on_ready: Callable[[Served], Any] | None = None) -> None:
        """Serve until stopped. In a thread other than the main one, signals stay with the main
        thread (uvicorn installs its handlers only there) and :meth:`stop` ends it. Started as a
        run (``$CLUSTERTUNE_RUN_DIR`` set: a SLURM job, an SSH host), the address is written into
        the run directory for the side that submitted it. ``on_ready`` is called once the model
        has loaded; a model that fails to load stops the server with :class:`ModelLoadError`."""
        self._on_ready = on_ready
        self._loader.start()
        run_dir = os.environ.get(RUN_DIR_ENV)
        if run_dir:
            write_address(RunPaths(Path(run_dir)), self.served)
        if on_listening is not None:
            on_listening(self.served)
        try:
            self._uvicorn.run(sockets=[self.sock])
        finally:
            if self.engine is not None:
                self.engine.close()
            if self.tinker is not None:
                self.tinker.close()
            self.sock.close()
        if self.engine is not None and self.engine.failed is not None:
            raise ModelLoadError(f"{self.engine.model_id} failed to load, so the server stopped: "
                                 f"{self.engine.failed}") from self.engine.error

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Whether the model loaded (False: it failed, see ``engine.failed``, or time ran out)."""
        self._done_loading.wait(timeout)
        return self.engine is None or self.engine.ready

    def stop(self) -> None:
        self._uvicorn.should_exit = True


def advertised_host(host: str) -> str:
    """The name other machines reach a server by: the node's name when it listens everywhere."""
    return socket.gethostname() if host in ("0.0.0.0", "::", "") else host


def write_address(paths: RunPaths, served: Served) -> None:
    atomic_write_json(paths.serve_address, {"model": served.model_id, "host": advertised_host(served.host),
                                            "bound": served.host, "port": served.port, "node": socket.gethostname(),
                                            "base_url": Served(served.model_id, advertised_host(served.host),
                                                               served.port).base_url})


def resolve_api_key(given: str | None) -> str | None:
    """``--api-key`` where given, else ``$CLUSTERTUNE_API_KEY``, else None (no key)."""
    return given if given is not None else os.environ.get(API_KEY_ENV)


def _uvicorn_server() -> type:
    import uvicorn

    class Quiet(uvicorn.Server):
        """uvicorn's server, ending normally on SIGTERM or Ctrl-C (a second Ctrl-C forces it)
        instead of raising the signal again once shut down: the command exits 0."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

    return Quiet

