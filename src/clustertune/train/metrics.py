"""metrics.jsonl (always) and Accelerate's trackers (TensorBoard, W&B, MLflow) when asked for."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from clustertune.fsutil import atomic_write_text
from clustertune.runs.metrics_file import read_metrics

def tracker_env(trackers: list[str], out_dir: Path) -> None:
    """Offline-first defaults: W&B offline (sync later), MLflow into the run directory (its file
    store, which MLflow 3 keeps only behind MLFLOW_ALLOW_FILE_STORE; a tracking server or
    database named by MLFLOW_TRACKING_URI is used as it is)."""
    if "wandb" in trackers:
        _default("WANDB_MODE", "offline")
        _default("WANDB_DIR", str(out_dir))
    if "mlflow" in trackers:
        if _default("MLFLOW_TRACKING_URI", (out_dir / "mlruns").resolve().as_uri()):
            _default("MLFLOW_ALLOW_FILE_STORE", "true")


# What tracker_env set (not the user): a later run in the same process sets its own values over
# these, so its trackers write into its own directory rather than the first run's.
_SET_HERE: dict[str, str] = {}


def _default(name: str, value: str) -> bool:
    """Set ``name`` unless the user set it; True when this process's value is ours."""
    if name in os.environ and _SET_HERE.get(name) != os.environ[name]:
        return False
    os.environ[name] = _SET_HERE[name] = value
    return True


def start_trackers(accelerator: Any, recipe: Any, run_id: str) -> None:
    """The recipe's trackers on ``accelerator`` (its ``log_with`` set): ``tracking.project`` as
    the W&B project, the MLflow experiment and TensorBoard's folder (in the run's ``trackers/``),
    the run id as the run's name, ``tracking.tags`` as tags, the resolved recipe as its
    configuration."""
    trackers = list(recipe.tracking.trackers)
    tags = list(recipe.tracking.tags)
    name = recipe.tracking.project
    # W&B keeps the first run's directory for the whole process unless each init names its own.
    wandb_dir = os.environ.get("WANDB_DIR")  # tracker_env's (this run's trackers/) or the user's own
    init = {"wandb": {"name": run_id, "tags": tags, **({"dir": wandb_dir} if wandb_dir else {})},
            "mlflow": {"run_name": run_id, "tags": {"clustertune.run_id": run_id, **{t: "true" for t in tags}}}}
    accelerator.init_trackers(name, config=flat_config(recipe.to_plain()),
                              init_kwargs={k: v for k, v in init.items() if k in trackers})


def log_final(accelerator: Any, summary: dict[str, Any], step: int) -> None:
    """The run's final figures (summary.json's numbers, the last evaluation) to its trackers, as
    ``final/...`` at the last step."""
    if accelerator is None or not accelerator.trackers:
        return
    final = {f"final/{k}": v for k, v in summary.items() if _number(v)}
    final.update({f"final/{k}": v for k, v in (summary.get("final_eval") or {}).items() if _number(v)})
    accelerator.log(final, step=step)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
