"""``serve``: a trained model behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from clustertune import api
from clustertune.cli.completion import complete_launch_key

from clustertune.errors import UserError
from clustertune.cli.use_cmds import Device, Dtype, Model, RunsRoot, Template


def serve(
    model: Optional[str] = typer.Argument(None, help="Run id (or a unique prefix) or a model directory to serve "
                                          "over OpenAI's protocol; leave it out with --tinker to serve the Tinker "
                                          "API alone.", autocompletion=Model.autocompletion),
    launch_keys: Optional[list[str]] = typer.Argument(None, help="launch.* keys (launch.backend=slurm, "
                                                      "launch.partition=..., launch.gpus_per_node=1): serve as a run "
                                                      "there, with status, logs and cancel.",
                                                      autocompletion=complete_launch_key),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; 0.0.0.0 reaches it from other machines "
                             "(set an --api-key then)."),
    port: Optional[int] = typer.Option(None, "--port", help="Port to listen on (default 8000; as a run, any free "
                                       "one); 0 takes any free one."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="Require this key (Authorization: Bearer KEY or "
                                          "X-API-Key: KEY); default $CLUSTERTUNE_API_KEY, else no key."),
    max_running: int = typer.Option(16, "--max-running", help="Requests answered at once (one batch)."),
    max_waiting: int = typer.Option(64, "--max-waiting", help="Requests that may wait for a place; past that, 429."),
    max_tokens: int = typer.Option(512, "--max-tokens", help="Longest answer when a request does not say "
                                   "(less if the context is full)."),
    max_body: Optional[int] = typer.Option(None, "--max-body", help="Largest request body in bytes; larger ones get "
                                           "413 (default: 64 bytes per token of the model's context, at least 4 MiB)."),
    log_prompts: bool = typer.Option(False, "--log-prompts", help="Log every prompt and answer (off by default)."),
    name: Optional[str] = typer.Option(None, "--name", help="The model's id in /v1/models (default: the run id, "
                                       "or the model directory's name)."),
    adapters: Optional[str] = typer.Option(None, "--adapters", help="Adapter runs of the served base to load at "
                                           "start, comma-separated (RUN1,RUN2); a request's `model` names one by "
                                           "its run id. Any other adapter run of the base loads when first asked "
                                           "for, with no restart."),
    max_adapters: int = typer.Option(8, "--max-adapters", help="Adapters held loaded at once; past that the one "
                                     "used longest ago is unloaded (it loads again when asked for)."),
    no_check: bool = typer.Option(False, "--no-check", help="Serve without comparing the model as loaded (its "
                                  "--dtype, --template, a merge) with the trained one on held-out prompts."),
    template: Optional[str] = Template,
    device: Optional[str] = Device,
    dtype: str = Dtype,
    runs_root: Optional[Path] = RunsRoot,
    tinker: bool = typer.Option(False, "--tinker", help="Also answer the Tinker training API under /api/v1: the "
                                "tinker SDK's ServiceClient(base_url=http://HOST:PORT) trains LoRA adapters of any "
                                "base this machine can load (a run, a model directory, a cached hub model)."),
    tinker_dir: Optional[Path] = typer.Option(None, "--tinker-dir", help="Where tinker:// checkpoints are written "
                                              "(default RUNS_ROOT/tinker)."),
    tinker_save_every: int = typer.Option(0, "--tinker-save-every", help="Also save each training client's "
                                          "weights and Adam state every N optimizer steps (tinker://MODEL/weights/"
                                          "autosave), for a server that may be killed; it always saves when it stops."),
) -> None:
    """Serve a trained model over OpenAI's chat-completions protocol (/v1/chat/completions,
    /v1/completions, /v1/models, /health) until Ctrl-C; with --tinker, the Tinker training API too."""

    limits = api.serving.Limits(running=max_running, waiting=max_waiting, max_tokens=max_tokens, max_body=max_body)
    if model is not None and model.startswith("launch.") and "=" in model:
        launch_keys, model = [model, *(launch_keys or [])], None
    if launch_keys and tinker and model is not None:
        raise UserError("--tinker with launch keys serves the Tinker API alone: leave the model out")
    if model is None and not tinker:
        raise UserError("name the model to serve (a run id or a model directory), or give --tinker to serve the "
                        "Tinker training API alone")
    if model is None and max_body is not None:
        # --max-body bounds the OpenAI routes' bodies; a Tinker-only server has none, and taking the
        # option in silence would promise a limit that is not there.
        raise UserError(f"--max-body {max_body}: limits the OpenAI routes' request bodies, and this server answers "
                        "the Tinker API alone (no model named): leave it out, or name a model to serve")
    adapter_refs = [a.strip() for a in (adapters or "").split(",") if a.strip()]
    if adapters is not None and not adapter_refs:
        raise UserError(f"--adapters {adapters!r}: name adapter runs, comma-separated (--adapters RUN1,RUN2)")
    if launch_keys and (adapter_refs or max_adapters != 8):
        raise UserError("--adapters and --max-adapters serve on this machine; as a run (launch keys) the base is "
                        "served alone: leave them out, or serve here")
    if launch_keys:
        not_keys = [k for k in launch_keys if not k.startswith("launch.") or "=" not in k]
        if not_keys:
            raise UserError(f"{', '.join(not_keys)}: after the model only launch.* keys (launch.backend=slurm ...) "
                            "are taken; options such as --port go before or after them with their dashes")
        on_ssh = any(k.replace(" ", "") == "launch.backend=ssh" for k in launch_keys)
        # On SSH hosts --port is this machine's end of the forward; the server takes any free port there.
        sub = api.serving.submit(model, launch_keys, runs_root=runs_root, host=host, port=0 if on_ssh or tinker else port or 0,
                             api_key=api_key,
                             device=device, dtype=dtype, template=template, limits=limits, log_prompts=log_prompts,
                             announce=lambda text: print(text, file=sys.stderr, flush=True),
                             cli_command=["clustertune", *sys.argv[1:]], tinker=tinker,
                             tinker_save_every=tinker_save_every, check=not no_check)
        run = sub.run
        if sub.address is None:
            print(f"run {run.id} {run.state.value}: its server has not started listening yet" if not run.state.terminal
                  else f"run {run.id} {run.state.value} before its server listened: `clustertune logs {run.id}`")
            if run.state.terminal:
                raise typer.Exit(1)
            print(f"  `clustertune status {run.id}` follows it; the address will be in {run.paths.serve_address}")
            return
        if on_ssh or tinker:
            _hold_forward(sub, 8000 if port is None else port, tinker=tinker)
            return
        print(f"run {run.id}: serving {sub.address['model']} at {sub.base_url} (node {sub.address['node']})")
        print(f"  from another machine: {sub.tunnel()}  then http://127.0.0.1:8000/v1")
        print(f"  `clustertune logs {run.id}`, `clustertune cancel {run.id}` as for any run")
        return

    if model is not None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a bar per weight load (the model, the check's reference): noise here

    def listening(served: Any) -> None:
        if model is not None:
            # Not "serving" yet: that is said once the model has loaded (a model that fails to
            # load stops the server with the error, exit 1).
            print(f"listening at {served.base_url}: loading {served.model_id} (GET /health says when ready)",
                  file=sys.stderr, flush=True)
        if tinker:
            print(f"Tinker API at {served.root_url}: tinker.ServiceClient(base_url={served.root_url!r}) with "
                  "TINKER_API_KEY=tml-... set (any key unless --api-key is given)", file=sys.stderr, flush=True)

    def ready(served: Any) -> None:
        if served.checked:
            print(f"answers as trained: {served.checked}", file=sys.stderr, flush=True)
        print(f"serving {served.model_id} at {served.base_url}", file=sys.stderr, flush=True)

    api.serving.serve(model, on_listening=listening, on_ready=ready if model is not None else None, host=host, port=8000 if port is None else port, api_key=api_key, runs_root=runs_root,
                  device=device, dtype=dtype, template=template, log_prompts=log_prompts,
                  limits=limits, name=name, tinker=tinker, tinker_dir=tinker_dir,
                  tinker_save_every=tinker_save_every, adapters=adapter_refs, max_adapters=max_adapters,
                  check=not no_check)


def _hold_forward(sub: Any, local_port: int, tinker: bool = False) -> None:
    """A server on an SSH host, forwarded here until Ctrl-C (which stops it) or until the run ends
    (`clustertune cancel` from anywhere)."""
    import time

    run = sub.run
    proxy = None
    a = sub.address
    fwd = None
    try:
        if tinker and run.info.backend != "ssh":
            proxy = api.serving.tinker_follow(sub, local_port)
            print(f"run {run.id}: Tinker API at {proxy.base_url} (the job on {a['node']}:{a['port']}; followed "
                  "when it is requeued)", flush=True)
        elif tinker:
            fwd, proxy = api.serving.tinker_forward(sub, local_port)
            print(f"run {run.id}: Tinker API at {proxy.base_url} (forwarded to {a['node']}:{a['port']}; "
                  "tokenizers are copied here as clients ask for them)", flush=True)
        else:
            fwd = api.serving.forward(sub, local_port)
            print(f"run {run.id}: serving {a['model']} at {fwd.base_url} (forwarded to {a['node']}:{a['port']})",
                  flush=True)
    except BaseException:
        # Nothing here reaches the server (the port is taken, the forward failed): stop it rather
        # than leave it running with no way in.
        api.job(run).cancel()
        raise
    print(f"  Ctrl-C stops it; `clustertune logs {run.id}`, `clustertune cancel {run.id}` from another terminal",
          flush=True)
    try:
        while not run.state.terminal:
            time.sleep(2)
            run = api.refreshed(run)
    except KeyboardInterrupt:
        api.job(run).cancel()
        run = api.refreshed(run)
    finally:
        if proxy is not None:
            proxy.close()
        if fwd is not None:
            fwd.close()
    port = proxy.local_port if proxy is not None else fwd.local_port
    print(f"run {run.id} {run.state.value}; the forward of 127.0.0.1:{port} is closed", flush=True)
