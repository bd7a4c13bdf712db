"""Reading a run's metrics.jsonl (one JSON object per line: train and eval rows).

The nodes write it (:mod:`clustertune.train.metrics`); status, reports and benchmarks read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a kill
    return rows
