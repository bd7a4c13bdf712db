"""Which runs use another run's files: an SFT or adapter run trained on its model, an RL run's
policy, reference or reward model, a tokenizer taken from it. Found in the runs' resolved
recipes (``recipe.yaml``): every path they name that lies inside the other run's directory.

``clustertune runs rm`` refuses to delete a run others still need (``--force`` deletes anyway),
and a run whose base was deleted says so instead of failing on a path that is not there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clustertune.runs.paths import RUN_JSON
from clustertune.runs.run import Run


@dataclass(frozen=True)
class Use:
    """Run ``user`` names ``path`` (inside run ``used``'s directory) at recipe key ``key``."""

    user: Run
    key: str
    path: str


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string leaf of a recipe with its dotted key (list items as ``key[i]``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{key}[{i}]")
    elif isinstance(value, str):
        yield key, value


def _inside(path: str, root: Path) -> bool:
    if not path or "\n" in path or not (path.startswith(("/", "~", ".")) or os.sep in path):
        return False  # a hub name, a number, text: not a path
    try:
        return Path(path).expanduser().resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False


def uses_of(run: Run, others: list[Run]) -> list[Use]:
    """Where the resolved recipes of ``others`` name a path inside ``run``'s directory."""
    root = run.paths.root.resolve()
    found = []
    for other in others:
        if other.id == run.id or not other.paths.recipe.is_file():
            continue
        try:
            plain = yaml.safe_load(other.paths.recipe.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue  # a damaged recipe names nothing we can read
        found += [Use(other, key, value) for key, value in _strings(plain) if _inside(value, root)]
    return found


def removed_run_of(path: str) -> str | None:
    """The id of the run a missing ``path`` pointed into (``<runs>/<id>/model``, a checkpoint of
    it...) when that run's directory is gone from a runs root that still holds other runs: the
    run was removed. None for anything else."""
    missing = Path(path).expanduser().absolute()
    if missing.exists():
        return None
    while not missing.parent.exists():  # the first component of the path that is not there
        if missing.parent == missing:
            return None
        missing = missing.parent
    root = missing.parent
    if any((d / RUN_JSON).is_file() for d in root.iterdir() if d.is_dir()):
        return missing.name
    return None
