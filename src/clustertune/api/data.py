"""Data through the one door: prepare a recipe's data into the cache, list, verify and remove
cache entries, stage an entry to node-local disk, fetch hub inputs for offline nodes.

Every call shows the data layer's progress lines on stderr (what ``clustertune prepare`` prints
while it works).
"""

from __future__ import annotations

import os
from pathlib import Path

from clustertune.api.runs import with_base
from clustertune.data.cache import PreparedDataset, cache_root as root_of, log_to_stderr, prepare as prepare_data
from clustertune.data.cache_entries import find_entries, list_entries, remove_entry
from clustertune.data.fetch import FetchResult, fetch as fetch_inputs
from clustertune.data.manifest import Manifest, load_manifest
from clustertune.data.staging import StageResult, resolve_stage_root, stage as stage_entry
from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

PathLike = str | os.PathLike[str]


def prepare(recipe: Recipe, workers: int | None = None, force: bool = False,
            cache_dir: PathLike | None = None) -> PreparedDataset:
    """The recipe's data, prepared once into the cache (a cache hit when it was before); a
    ``run:<run>`` base is that run's final model (its tokenizer), as ``run`` takes it."""
    recipe = with_base(recipe)

    with log_to_stderr():
        return prepare_data(recipe, workers=workers, force=force, cache_dir=cache_dir)


def cache_root(cache_dir: PathLike | None = None) -> Path:
    """The cache root (``cache_dir``, else ``$CLUSTERTUNE_CACHE``, else the user's cache); a file
    in its place is named, not taken for an empty cache."""
    root = root_of(None, cache_dir)
    if root.exists() and not root.is_dir():
        raise DataError(f"cache root {root} is not a directory; pass --cache-dir DIR (or set $CLUSTERTUNE_CACHE) "
                        "to the directory that holds the prepared data")
    return root


def cache_entries(root: Path) -> list[Manifest]:
    """The complete entries under ``root``, oldest first."""
    return list_entries(root)


def find_cache_entries(root: Path, prefixes: list[str]) -> list[Path]:
    """Entry directories named by fingerprint prefixes (each must name exactly one)."""
    return find_entries(root, prefixes)


def entry_dirs(root: Path) -> list[Path]:
    """Every directory under ``root`` that stands for an entry, complete or not (what verify checks)."""
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name != "tokenizers")


def remove_cache_entry(entry: Path) -> None:
    """Delete one entry under its lock (never while a prepare of it runs)."""
    remove_entry(entry)


def read_entry(entry: Path) -> Manifest:
    """An entry's manifest (``verify()`` then checks every file against it)."""
    return load_manifest(entry)


def stage(recipe: Recipe, dest: str, cache_dir: PathLike | None = None) -> tuple[PreparedDataset, StageResult]:
    """The recipe's prepared data copied to ``dest``/<fingerprint>/ (as ``data.stage_to`` does on
    each node), every copied byte checked."""
    with log_to_stderr():
        p = prepare_data(recipe, cache_dir=cache_dir)
        return p, stage_entry(p.dir, resolve_stage_root(dest))


def fetch(recipe: Recipe, store: Path, out: Path | None = None, prepare_data: bool = True) -> FetchResult:
    """With internet: the recipe's hub model, tokenizer and dataset copied into ``store``, and a
    recipe that names the copies written (for nodes without internet)."""
    with log_to_stderr():
        return fetch_inputs(recipe, store, out, prepare_data=prepare_data)
