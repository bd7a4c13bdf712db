"""The shapes prepared data takes, one module per shape, behind one protocol (:class:`DataShape`).

A task's traits name its shape (:mod:`clustertune.recipe.task_traits`); the shape says what
decides its bytes (its part of the fingerprint), builds its splits into a prepared-data
directory, and opens a split again as arrays for the loader. The cache
(:mod:`clustertune.data.cache`) identifies, locks, asks the shape to build and writes the
manifest; it names no shape.

Adding a shape: a module here with one object that follows :class:`DataShape`, its name in
:data:`SHAPES` and in ``recipe.task_traits.DataShape``, and a task whose traits name it.
"""

from __future__ import annotations

from typing import Any

from clustertune.data.shapes.base import Built, BuildJob, DataShape
from clustertune.data.shapes.chats import CHATS
from clustertune.data.shapes.labelled_text import LABELLED_TEXT
from clustertune.data.shapes.packed_text import PACKED_TEXT
from clustertune.data.shapes.pairs import PAIRS
from clustertune.data.manifest import Manifest
from clustertune.errors import DataError

__all__ = ["Built", "BuildJob", "DataShape", "SHAPES", "open_split", "shape_named", "shape_of"]

SHAPES: dict[str, DataShape] = {s.name: s for s in (PACKED_TEXT, LABELLED_TEXT, CHATS, PAIRS)}


def shape_named(name: str) -> DataShape:
    """The shape of that name (a manifest's or a task's traits')."""
    try:
        return SHAPES[name]
    except KeyError:
        raise DataError(f"prepared data of shape {name!r} is not known to this clustertune "
                        f"(known: {', '.join(sorted(SHAPES))})") from None


def shape_of(recipe: object) -> DataShape:
    """The shape the recipe's task prepares its data into; DataError for a task whose trainer
    loads its own data."""
    traits = recipe.traits  # type: ignore[attr-defined]
    if traits.data is None:
        raise DataError(f"task {recipe.task} prepares no data: its trainer loads its own")  # type: ignore[attr-defined]
    return shape_named(traits.data)


def open_split(manifest: Manifest, name: str) -> Any:
    """A prepared split as the loader batches it, opened by the shape its entry was built in."""
    arrays, spec = manifest.mapped_split(name)
    return shape_named(manifest.shape_of(spec)).load(arrays, spec, manifest.dir)
