"""Data through the one door: prepare a recipe's data into the cache, list, verify and remove
cache entries, stage an entry to node-local disk, fetch hub inputs for offline nodes.

Every call shows the data layer's progress lines on stderr (what ``clustertune prepare`` prints
while it works); numpy and the tokenizer stack are imported when a call needs them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

if TYPE_CHECKING:
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache import PreparedDataset
    from clustertune.data.fetch import FetchResult
    from clustertune.data.manifest import Manifest
    from clustertune.data.staging import StageResult

PathLike = str | os.PathLike[str]


def prepare(recipe: Recipe, workers: int | None = None, force: bool = False,
            cache_dir: PathLike | None = None) -> PreparedDataset:
    """The recipe's data, prepared once into the cache (a cache hit when it was before); a
    ``run:<run>`` base is that run's final model (its tokenizer), as ``run`` takes it."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.api import with_base
    from clustertune.data.cache import log_to_stderr, prepare as prepare_data

    recipe = with_base(recipe)

    with log_to_stderr():
        return prepare_data(recipe, workers=workers, force=force, cache_dir=cache_dir)


def cache_root(cache_dir: PathLike | None = None) -> Path:
    """The cache root (``cache_dir``, else ``$CLUSTERTUNE_CACHE``, else the user's cache); a file
    in its place is named, not taken for an empty cache."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache import cache_root as root_of

    root = root_of(None, cache_dir)
    if root.exists() and not root.is_dir():
        raise DataError(f"cache root {root} is not a directory; pass --cache-dir DIR (or set $CLUSTERTUNE_CACHE) "
                        "to the directory that holds the prepared data")
    return root


def cache_entries(root: Path) -> list[Manifest]:
    """The complete entries under ``root``, oldest first."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache_entries import list_entries

    return list_entries(root)


def find_cache_entries(root: Path, prefixes: list[str]) -> list[Path]:
    """Entry directories named by fingerprint prefixes (each must name exactly one)."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache_entries import find_entries

    return find_entries(root, prefixes)


def entry_dirs(root: Path) -> list[Path]:
    """Every directory under ``root`` that stands for an entry, complete or not (what verify checks)."""
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name != "tokenizers")


def remove_cache_entry(entry: Path) -> None:
    """Delete one entry under its lock (never while a prepare of it runs)."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache_entries import remove_entry

    remove_entry(entry)


def read_entry(entry: Path) -> Manifest:
    """An entry's manifest (``verify()`` then checks every file against it)."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.manifest import load_manifest

    return load_manifest(entry)


def stage(recipe: Recipe, dest: str, cache_dir: PathLike | None = None) -> tuple[PreparedDataset, StageResult]:
    """The recipe's prepared data copied to ``dest``/<fingerprint>/ (as ``data.stage_to`` does on
    each node), every copied byte checked."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache import log_to_stderr, prepare as prepare_data
    from clustertune.data.staging import resolve_stage_root, stage as stage_entry

    with log_to_stderr():
        p = prepare_data(recipe, cache_dir=cache_dir)
        return p, stage_entry(p.dir, resolve_stage_root(dest))


def fetch(recipe: Recipe, store: Path, out: Path | None = None, prepare_data: bool = True) -> FetchResult:
    """With internet: the recipe's hub model, tokenizer and dataset copied into ``store``, and a
    recipe that names the copies written (for nodes without internet)."""
    # Deferred: the data layer imports numpy and the tokenizer stack; the CLI's start-up imports this module.
    from clustertune.data.cache import log_to_stderr
    from clustertune.data.fetch import fetch as fetch_inputs

    with log_to_stderr():
        return fetch_inputs(recipe, store, out, prepare_data=prepare_data)
