"""The base model a Tinker client names: a run id or name, a model directory, or a hub model in the
local cache, and the directory its tokenizer loads from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.runs.paths import has_tokenizer
from clustertune.serve.tinker.lora import TinkerUserError
from clustertune.use.load import find_target


def resolve_base(ref: str, runs_root: str | None) -> tuple[Any, Path]:
    """What ``base_model`` names (a run id or name, a model directory, a hub name in the local
    cache) and the directory its tokenizer loads from."""
    ref = (ref or "").strip()
    if not ref:
        raise TinkerUserError("base_model is empty: name a run id, a model directory or a cached hub model")
    try:
        target = find_target(ref, runs_root)
    except UserError as exc:
        cached = _hub_snapshot(ref)
        if cached is None:
            raise TinkerUserError(f"base_model {ref!r}: {exc}") from None
        target = find_target(str(cached), runs_root)
    if target.classifier:
        raise TinkerUserError(f"base_model {ref!r} is a sequence classifier; Tinker trains causal LMs")
    for where in (target.path, target.run.paths.tokenizer if target.run is not None else None):
        if where is not None and has_tokenizer(where):
            return target, where
    raise TinkerUserError(f"base_model {ref!r}: no tokenizer beside the model ({target.path})")


def _hub_snapshot(ref: str) -> Path | None:
    """The local snapshot of hub model ``ref`` (org/name), if the hub cache holds one."""
    if ref.count("/") != 1 or ref.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(ref, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (or not a hub name): the caller says what was tried
        return None
