"""Where ``tinker://`` paths live on disk, and what the server keeps about each training client.

``tinker://MODEL_ID/weights/NAME`` (``save_state``: adapter and optimizer state) and
``tinker://MODEL_ID/sampler_weights/NAME`` (``save_weights_for_sampler``: the adapter alone)
are ``ROOT/MODEL_ID/weights/NAME`` and ``ROOT/MODEL_ID/sampler_weights/NAME``. ``ROOT`` is the
server's state directory (``RUNS_ROOT/tinker`` by default, the run directory's ``tinker/``
when the server is a run). Each client's settings are in ``ROOT/MODEL_ID/model.json``, so a
server started again over the same directory knows the clients and their checkpoints.
A sampler directory is a PEFT adapter: ``clustertune generate/chat/export`` open it.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clustertune.fsutil import atomic_write_json
from clustertune.serve.tinker.lora import STATE, TinkerUserError

SCHEME = "tinker://"
LAST_STOP = "server-stop"  # written when the server stops (SIGTERM, a requeue, Ctrl-C)
AUTOSAVE = "autosave"  # written every --tinker-save-every optimizer steps
KINDS = {"weights": "training", "sampler_weights": "sampler"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # SESSION:train:N


@dataclass(frozen=True)
class Ref:
    model_id: str
    kind: str  # "weights" or "sampler_weights"
    name: str

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.model_id}/{self.kind}/{self.name}"


class Store:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def parse(self, path: str) -> Ref:
        if not isinstance(path, str) or not path.startswith(SCHEME):
            raise TinkerUserError(f"{path!r}: not a tinker:// path (tinker://MODEL_ID/weights/NAME, as save_state "
                                  "returns)")
        parts = path[len(SCHEME):].strip("/").split("/")
        if len(parts) != 3 or parts[1] not in KINDS or not _MODEL_ID.fullmatch(parts[0]) or not _NAME.fullmatch(parts[2]):
            raise TinkerUserError(f"{path!r}: a tinker:// path is tinker://MODEL_ID/weights/NAME or "
                                  "tinker://MODEL_ID/sampler_weights/NAME")
        return Ref(parts[0], parts[1], parts[2])

    def ref(self, model_id: str, kind: str, name: str | None, fallback: str) -> Ref:
        name = name or fallback
        if not _NAME.fullmatch(name):
            raise TinkerUserError(f"checkpoint name {name!r}: letters, digits, '.', '_' and '-' only (up to 128)")
        return Ref(model_id, kind, name)

    def dir(self, ref: Ref) -> Path:
        return self.root / ref.model_id / ref.kind / ref.name

    def existing(self, ref: Ref) -> Path:
        d = self.dir(ref)
        if not (d / STATE).is_file():
            known = [c["tinker_path"] for c in self.checkpoints(ref.model_id)]
            raise TinkerUserError(f"{ref.uri}: no such checkpoint on this server"
                                  + (f" (this model has {', '.join(known)})" if known else ""))
        return d

    # -- clients --------------------------------------------------------------------------------

    def record_model(self, model_id: str, info: dict[str, Any]) -> None:
        if not _MODEL_ID.fullmatch(model_id):  # the callers made it from checked parts
            raise ValueError(f"model id {model_id!r} cannot name a directory")
        (self.root / model_id).mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.root / model_id / "model.json", info)

    def model_record(self, model_id: str) -> dict[str, Any] | None:
        """The client's record; None for one never recorded, and for an id that could not be one
        (an absolute path, ``..``: nothing outside the root is read)."""
        if not isinstance(model_id, str) or not _MODEL_ID.fullmatch(model_id):
            return None
        try:
            return json.loads((self.root / model_id / "model.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def checkpoints(self, model_id: str) -> list[dict[str, Any]]:
        """The model's checkpoints in the SDK's ``Checkpoint`` shape, oldest first."""
        found: list[dict[str, Any]] = []
        if not _MODEL_ID.fullmatch(model_id):
            return found
        for kind, ctype in KINDS.items():
            for d in sorted((self.root / model_id / kind).glob("*")) if (self.root / model_id / kind).is_dir() else []:
                if not (d / STATE).is_file():
                    continue
                size = sum(f.stat().st_size for f in d.iterdir() if f.is_file())
                when = datetime.fromtimestamp((d / STATE).stat().st_mtime, tz=timezone.utc)
                found.append({"checkpoint_id": f"{kind}/{d.name}", "checkpoint_type": ctype,
                              "time": when.isoformat(), "tinker_path": Ref(model_id, kind, d.name).uri,
                              "size_bytes": size, "public": False})
        return sorted(found, key=lambda c: c["time"])

    def latest(self, model_id: str) -> Ref:
        """The client's state as the server last stopped with it."""
        return Ref(model_id, "weights", LAST_STOP)

    def autosave(self, model_id: str) -> Ref:
        """The client's state every ``--tinker-save-every`` optimizer steps."""
        return Ref(model_id, "weights", AUTOSAVE)

    def record_samplers(self, samplers: dict[str, Any]) -> None:
        atomic_write_json(self.root / "samplers.json", samplers)

    def sampler_records(self) -> dict[str, Any]:
        try:
            return json.loads((self.root / "samplers.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def delete(self, ref: Ref) -> None:
        shutil.rmtree(self.existing(ref))
