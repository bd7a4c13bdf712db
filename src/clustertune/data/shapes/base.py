"""The protocol every data shape follows, and what the cache hands a shape to build."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clustertune.data.manifest import write_array
from clustertune.data.sources import RawData
from clustertune.recipe.schema import Recipe


@dataclass
class BuildJob:
    """One build of a cache entry, as the cache sets it up: write the splits under ``out``,
    each file entered in ``files`` (and, when not flushed yet, listed in ``unsynced``: the cache
    flushes them together before the manifest that makes the entry complete)."""

    recipe: Recipe
    out: Path
    tokenizer: Any
    """The tokenizer, loaded (a shape may set what it saves with it: the chat template)."""
    raw: Callable[[], RawData]
    """The raw examples, loaded on the first call (a shape that reads files in chunks never calls it)."""
    workers: int
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    unsynced: list[Path] = field(default_factory=list)


@dataclass
class Built:
    """What a shape built: each split's manifest entry, what the manifest adds at its top level
    (a classifier's label set), and the seconds spent writing arrays (not tokenizing)."""

    splits: dict[str, dict[str, Any]]
    manifest: dict[str, Any] = field(default_factory=dict)
    write_seconds: float = 0.0


class DataShape(Protocol):
    """One shape of prepared data. Everything below takes the recipe as validated."""

    name: str
    """Its name in task traits and in this package's registry."""

    reads_text_column: bool
    """Its examples carry their text in ``data.text_column`` (checked when the raw data loads);
    chats carry messages instead."""

    classifier_tokens: bool
    """A tokenizer trained on the spot for it gets a classifier's special tokens."""

    def selection(self, recipe: Recipe) -> dict[str, Any]:
        """Which parts of each example it reads beyond the text column (label column, label
        rule): joins the corpus identity, so a tokenizer trained on the spot depends on it."""
        ...

    def processing(self, recipe: Recipe) -> dict[str, Any]:
        """What decides its bytes beyond the source and the tokenizer (block size, padding,
        template settings): its part of the fingerprint."""
        ...

    def tokenizer_inputs(self, recipe: Recipe, tokenizer: Callable[[], Any]) -> dict[str, Any]:
        """What the tokenizer gives the fingerprint beyond its content hash (``tokenizer()``
        loads it, only when needed)."""
        ...

    def build(self, job: BuildJob) -> Built:
        """Tokenize and write every split."""
        ...

    def load(self, arrays: dict[str, Any], spec: Any, directory: Path) -> Any:
        """One split opened again: its memory-mapped ``arrays`` (by name) and manifest ``spec``
        as what the loader batches (``to_batch``)."""
        ...


def write_arrays(job: BuildJob, split: str, named: dict[str, Any]) -> dict[str, Any]:
    """Write one split's arrays (name -> numpy array) as ``<split>.<name>`` files of the entry:
    their manifest entries by name."""
    return {key: write_array(job.out, f"{split}.{key}", arr, job.files, job.unsynced) for key, arr in named.items()}
