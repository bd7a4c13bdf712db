"""Serving through the API: what the ``serve`` command (and a program) calls."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from clustertune.errors import UserError
from clustertune.serve.engine import Limits
from clustertune.serve.server import Served, Server, prepare, resolve_api_key

__all__ = ["Limits", "Served", "serve", "start"]


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
