"""``serve``: a trained model behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from clustertune.api import serving
from clustertune.cli.use_cmds import Device, Dtype, Model, RunsRoot, Template


def serve(
    model: str = Model,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; 0.0.0.0 reaches it from other machines "
                             "(set an --api-key then)."),
    port: int = typer.Option(8000, "--port", help="Port to listen on; 0 takes any free one."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="Require this key (Authorization: Bearer KEY or "
                                          "X-API-Key: KEY); default $CLUSTERTUNE_API_KEY, else no key."),
    max_running: int = typer.Option(16, "--max-running", help="Requests answered at once (one batch)."),
    max_waiting: int = typer.Option(64, "--max-waiting", help="Requests that may wait for a place; past that, 429."),
    max_tokens: int = typer.Option(512, "--max-tokens", help="Longest answer when a request does not say "
                                   "(less if the context is full)."),
    log_prompts: bool = typer.Option(False, "--log-prompts", help="Log every prompt and answer (off by default)."),
    template: Optional[str] = Template,
    device: Optional[str] = Device,
    dtype: str = Dtype,
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Serve a trained model over OpenAI's chat-completions protocol (/v1/chat/completions,
    /v1/completions, /v1/models, /health) until Ctrl-C."""

    def listening(served: Any) -> None:
        print(f"serving {served.model_id} at {served.base_url} (loading the model; GET /health says when ready)",
              file=sys.stderr, flush=True)

    serving.serve(model, on_listening=listening, host=host, port=port, api_key=api_key, runs_root=runs_root,
                  device=device, dtype=dtype, template=template, log_prompts=log_prompts,
                  limits=serving.Limits(running=max_running, waiting=max_waiting, max_tokens=max_tokens))
