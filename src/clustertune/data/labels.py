"""Class labels of classification data: how many classes, their names, and each label's id.

As ``run_glue.py`` reads them: a ``ClassLabel`` column gives ids and names; integer labels are
the ids themselves (``model.num_labels`` unset: the largest + 1); string labels are names, given
ids in sorted order (``data.label_names`` fixes another order). The names travel with the
prepared data (its manifest, the run's ``data.json``) into the model's config as
``id2label``/``label2id``. The rule lives in :data:`LABEL_RULE`, which is part of the data
fingerprint: the ids written into the prepared arrays depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clustertune.data.origins import Origins, row_at
from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

# Bump when the mapping from labels to ids changes (it decides the prepared labels' bytes).
LABEL_RULE = "classlabel-names|int-ids|str-sorted:1"


@dataclass(frozen=True)
class LabelSet:
    """The classes of a classification run: their count, and their names when the data has some."""

    num_labels: int
    names: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"num_labels": self.num_labels, "names": list(self.names) if self.names is not None else None}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> LabelSet | None:
        if not d:
            return None
        names = d.get("names")
        return cls(int(d["num_labels"]), tuple(str(n) for n in names) if names is not None else None)

    @property
    def id2label(self) -> dict[int, str]:
        return {i: n for i, n in enumerate(self.names)} if self.names is not None else {}


def _column(ds: Any, name: str) -> list[Any]:
    return ds.with_format("arrow")[name].to_pylist()


def _class_label_names(ds: Any, column: str) -> list[str] | None:
    feature = getattr(ds, "features", {}).get(column) if hasattr(ds, "features") else None
    names = getattr(feature, "names", None)
    return [str(n) for n in names] if names else None


def require_label_column(recipe: Recipe, ds: Any, split: str) -> None:
    col = recipe.data.label_column
    if col not in ds.column_names:
        raise DataError(f"data.label_column: column {col!r} not in the {split} data; "
                        f"its columns are {', '.join(ds.column_names)}")


def _limited(recipe: Recipe, values: list[Any], split: str) -> list[Any]:
    d = recipe.data
    limit = d.max_train_samples if split == "train" else d.max_eval_samples
    return values[:limit] if limit and d.sample_selection != "shuffled" else values  # shuffled: any row may be drawn


def _kind(v: Any) -> str:
    if isinstance(v, str):
        return "str"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return "int"
    return "other"


def infer_labels(recipe: Recipe, splits: dict[str, Any], origins: dict[str, Origins] | None = None) -> LabelSet:
    """The classes of ``splits`` (name -> ``datasets.Dataset``, training split first), every
    label checked: DataError names the row where it was read (``origins``: the file and line of
    each split's rows, whatever the validation carve took), its split and the fix."""
    d, n_set = recipe.data, recipe.model.num_labels

    def where(split: str, i: int) -> str:
        return row_at((origins or {}).get(split), split, i)

    values: dict[str, list[Any]] = {}
    for split, ds in splits.items():
        require_label_column(recipe, ds, split)
        values[split] = _limited(recipe, _column(ds, d.label_column), split)
    first = next(iter(splits))
    names = d.label_names or _class_label_names(splits[first], d.label_column)
    kinds = {_kind(v) for vs in values.values() for v in vs}
    if "other" in kinds or kinds == {"str", "int"}:
        split, i, v = next((s, i, v) for s, vs in values.items() for i, v in enumerate(vs)
                           if _kind(v) == "other" or (kinds == {"str", "int"} and _kind(v) == "int"))
        raise DataError(f"data.label_column: {where(split, i)} has label {v!r} ({type(v).__name__}); labels must be "
                        "all integers (class ids) or all strings (class names)")
    if kinds == {"str"}:
        if names is None:
            names = sorted(set(values[first]))
        index = set(names)
        for split, vs in values.items():
            bad = [(i, v) for i, v in enumerate(vs) if v not in index]
            if bad:
                i, v = bad[0]
                known = "data.label_names" if d.label_names else f"the {first} labels"
                raise DataError(f"data.label_column: {where(split, i)} has label {v!r}, which is not one of {known} "
                                f"({', '.join(map(repr, names))}); {len(bad)} such row(s). List every class in "
                                "data.label_names, or give each class some training rows")
        if n_set is not None and n_set != len(names):
            raise DataError(f"model.num_labels: {n_set}, but the data has {len(names)} label names "
                            f"({', '.join(map(repr, names))}); drop model.num_labels to infer it")
    if len(names or ()) == 1 or (kinds == {"str"} and len(names) < 2):
        raise DataError(f"data.label_column: the {first} data has a single label {names[0]!r}; "
                        "classification needs two or more classes")
    n = len(names) if names else n_set
    if kinds != {"str"}:
        ints = [int(v) for vs in values.values() for v in vs]
        if n is None:
            n = max(2, max(ints, default=0) + 1)
        for split, vs in values.items():
            bad = [(i, v) for i, v in enumerate(vs) if not 0 <= int(v) < n]
            if bad:
                i, v = bad[0]
                why = (f"labels must be integers below model.num_labels={n}" if n_set is not None or names
                       else f"labels must be integers from 0 (the largest here is {max(ints)})")
                raise DataError(f"data.label_column: {where(split, i)} has label {v!r}, outside 0..{n - 1} "
                                f"({len(bad)} bad row(s) in all); {why}")
    assert n is not None
    return LabelSet(n, tuple(names) if names else None)


def label_ids(labels: LabelSet, values: list[Any]) -> np.ndarray:
    """Each label as its class id (names by their position, integers as they are)."""
    if labels.names is not None and values and isinstance(values[0], str):
        index = {n: i for i, n in enumerate(labels.names)}
        return np.asarray([index[v] for v in values], dtype=np.int64)
    return np.asarray(values, dtype=np.int64)
