"""Evaluations of a finished run (``clustertune eval``): one JSON file each under ``evals/``,
written atomically, and the short listing ``runs show`` prints.

Every file holds ``kind`` (``metrics``: the run's own metrics on some data; ``lm-eval``: tasks of
EleutherAI's harness), ``name`` (the data or the tasks), ``created_at`` and ``metrics``: a flat
``{name: number}`` map of the headline figures (the full result sits beside it).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clustertune.fsutil import atomic_write_json
from clustertune.runs.paths import RunPaths


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60] or "eval"


def write_eval(path_dir: Path, payload: dict[str, Any]) -> Path:
    """``payload`` (plain JSON) into ``path_dir/<UTC time>-<name>.json``, atomically."""
    now = datetime.now(timezone.utc)
    payload = {"created_at": now.isoformat(timespec="seconds"), **payload}
    path_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{now.strftime('%Y%m%dT%H%M%S')}-{_slug(str(payload.get('name', 'eval')))}"
    out, n = path_dir / f"{stem}.json", 1
    while out.exists():  # two evaluations within a second
        n += 1
        out = path_dir / f"{stem}-{n}.json"
    atomic_write_json(out, json.loads(json.dumps(payload, default=_plain)))
    return out


def _plain(value: Any) -> Any:
    """numpy numbers and other strays of a library's result, as JSON can hold them."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def read_evals(paths: RunPaths) -> list[tuple[Path, dict[str, Any]]]:
    """The run's evaluations, oldest first; unreadable files are skipped."""
    out = []
    for p in sorted(paths.evals.glob("*.json")) if paths.evals.is_dir() else []:
        try:
            out.append((p, json.loads(p.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    return out


def format_metrics(metrics: dict[str, Any], limit: int = 8) -> str:
    shown = [f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return "  ".join(shown[:limit]) + ("  ..." if len(shown) > limit else "")


def eval_lines(paths: RunPaths, newest: int = 5) -> list[str]:
    """``runs show``'s section: the newest evaluations, one line each, and where they are."""
    found = read_evals(paths)
    if not found:
        return []
    lines = [f"evals     {paths.evals} ({len(found)})"]
    for p, e in found[-newest:]:
        lines.append(f"  {e.get('created_at', '?')}  {e.get('kind', '?')}: {e.get('name', p.stem)}  "
                     f"{format_metrics(e.get('metrics') or {})}")
    return lines
