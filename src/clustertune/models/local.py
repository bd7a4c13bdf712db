"""Models named by a local path: such a name is never taken for a hub name, and one that pointed
into a run that was removed says so."""

from __future__ import annotations

from pathlib import Path

from clustertune.errors import ModelError
from clustertune.runs.dependents import removed_run_of


def is_pathish(s: str) -> bool:
    """Written as a path (absolute, relative with ./ or ../, home-relative, or a .json file)."""
    return s.startswith(("/", "./", "../", "~")) or s.endswith(".json")


def require_local(name: str, key: str) -> None:
    """A model named by a path must be there; one that pointed into a run that was removed
    (``clustertune runs rm``) says so, instead of being taken for a hub name."""
    if not is_pathish(name) or Path(name).expanduser().exists():
        return
    gone = removed_run_of(name)
    if gone is not None:
        raise ModelError(f"{key}: {name} does not exist: its base run {gone} was removed (`clustertune runs rm`); "
                         f"train it again (a run of the same recipe) and point {key} at its model, or name another model")
    raise ModelError(f"{key}: directory {name!r} does not exist")
