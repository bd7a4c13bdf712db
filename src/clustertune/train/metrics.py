"""metrics.jsonl (always) and Accelerate's trackers (TensorBoard, W&B, MLflow) when asked for."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path
from typing import Any

from clustertune.errors import TrackingError
from clustertune.fsutil import atomic_write_text
from clustertune.runs.metrics_file import read_metrics

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def check_trackers(trackers: list[str]) -> None:
    missing = [t for t in trackers if importlib.util.find_spec(TRACKER_PACKAGES[t]) is None]
    if missing:
        raise TrackingError(
            f"tracking.trackers: {', '.join(missing)} asked for but not installed; "
            f"`pip install {' '.join(TRACKER_PACKAGES[m] for m in missing)}` or remove it from the recipe"
        )


def tracker_env(trackers: list[str], out_dir: Path) -> None:
    """Offline-first defaults: W&B offline (sync later), MLflow into the run directory."""
    if "wandb" in trackers:
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", str(out_dir))
    if "mlflow" in trackers:
        os.environ.setdefault("MLFLOW_TRACKING_URI", (out_dir / "mlruns").resolve().as_uri())


def flat_config(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested recipe -> flat scalars (trackers' hyperparameter tables take scalars only)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_config(v, key + "."))
        elif isinstance(v, (int, float, str, bool)):
            out[key] = v
        else:
            out[key] = json.dumps(v)
    return out


class MetricsWriter:
    """Appends rows to metrics.jsonl (main process only) and forwards numbers to trackers."""

    def __init__(self, path: Path, accelerator: Any | None, enabled: bool):
        self.path, self.accelerator, self.enabled = path, accelerator, enabled

    def log(self, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(clean) + "\n")
        if self.accelerator is not None and self.accelerator.trackers:
            nums = {f"{row['kind']}/{k}": v for k, v in clean.items()
                    if k not in ("kind", "step", "time") and isinstance(v, (int, float)) and not isinstance(v, bool)}
            self.accelerator.log(nums, step=int(row["step"]))


def truncate_after(path: Path, step: int) -> int:
    """Drop rows written after ``step`` (by an attempt that died); returns how many were dropped."""
    rows = read_metrics(path)
    keep = [r for r in rows if int(r.get("step", 0)) <= step]
    if len(keep) == len(rows) and path.is_file() and path.read_text(encoding="utf-8").endswith("\n"):
        return 0
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in keep))
    return len(rows) - len(keep)
