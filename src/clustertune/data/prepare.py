"""Turn raw examples into training arrays.

- causal LM (``run_clm.py`` semantics): tokenize every text, concatenate the whole split once,
  cut into ``block_size`` blocks, drop the one global remainder; labels are the inputs (the
  model shifts them). The result does not depend on batch or worker counts: it equals
  ``run_clm.py``'s with the whole split as one map batch (``num_proc=1, batch_size=None``).
- classification: truncate and pad every example to ``max_length``; integer labels checked
  against ``num_labels``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from clustertune.data.encode import encode_flat, encode_texts, id_dtype
from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

__all__ = ["Arrays", "encode_flat", "encode_texts", "group_blocks", "causal_lm_arrays", "classification_arrays",
           "prepare_split", "check_labels", "column"]
_BATCH = 1000
log = logging.getLogger("clustertune")


@dataclass
class Arrays:
    """One split as dense arrays; ``attention_mask``/``labels`` only for classification."""

    input_ids: np.ndarray
    attention_mask: np.ndarray | None = None
    labels: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def tokens(self) -> int:
        if self.attention_mask is not None:
            return int(self.attention_mask.sum())
        return int(self.input_ids.size)


def group_blocks(ids_per_text: list[list[int]], block_size: int, vocab: int) -> np.ndarray:
    """Concatenate all ids and cut into full blocks; the remainder (< block_size) is dropped."""
    total = sum(len(x) for x in ids_per_text)
    flat = np.empty(total, dtype=id_dtype(vocab))
    pos = 0
    for x in ids_per_text:
        flat[pos : pos + len(x)] = x
        pos += len(x)
    n_blocks = total // block_size
    return flat[: n_blocks * block_size].reshape(n_blocks, block_size)


def causal_lm_arrays(texts: list[str], tokenizer: Any, block_size: int, limit: int | None, split: str,
                     workers: int = 1) -> Arrays:
    flat = encode_flat(texts, tokenizer, workers)
    n_blocks = len(flat) // block_size
    blocks = flat[: n_blocks * block_size].reshape(n_blocks, block_size)
    if limit is not None:
        blocks = blocks[:limit]
    if len(blocks) == 0:
        raise DataError(
            f"data: the {split} text has fewer tokens than one block of {block_size}; "
            "lower data.block_size or give more text"
        )
    return Arrays(input_ids=blocks)


def classification_arrays(
    texts: list[str], labels: list[Any], tokenizer: Any, max_length: int, limit: int | None, split: str
) -> Arrays:
    """Padded/truncated ids, attention mask and labels (labels already checked by check_labels)."""
    if limit is not None:
        texts, labels = texts[:limit], labels[:limit]
    if not texts:
        raise DataError(f"data: the {split} split has no examples")
    ids = np.zeros((len(texts), max_length), dtype=id_dtype(len(tokenizer)))
    mask = np.zeros((len(texts), max_length), dtype=np.uint8)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids[:] = pad
    for start in range(0, len(texts), _BATCH):
        enc = tokenizer(texts[start : start + _BATCH], truncation=True, max_length=max_length, verbose=False)
        for j, row in enumerate(enc["input_ids"]):
            ids[start + j, : len(row)] = row
            mask[start + j, : len(row)] = 1
    return Arrays(input_ids=ids, attention_mask=mask, labels=np.asarray(labels, dtype=np.int64))


def column(ds: Any, name: str) -> list[Any]:
    """One column of a ``datasets.Dataset`` as a list, in row order (selections included), read
    through Arrow: iterating ``ds[name]`` goes row by row through the formatter, ~300x slower."""
    return ds.with_format("arrow")[name].to_pylist()


def prepare_split(recipe: Recipe, ds: Any, tokenizer: Any, split: str, workers: int = 1) -> Arrays:
    d = recipe.data
    texts = [t if isinstance(t, str) else "" if t is None else str(t) for t in column(ds, d.text_column)]
    limit = d.max_train_samples if split == "train" else d.max_eval_samples
    shuffled, limit = (limit, None) if d.sample_selection == "shuffled" else (None, limit)
    if recipe.task == "causal_lm":
        arrays = causal_lm_arrays(texts, tokenizer, d.block_size, limit, split, workers)
    else:
        check_labels(recipe, ds, split)
        arrays = classification_arrays(texts, column(ds, d.label_column), tokenizer, d.max_length, limit, split)
    return select_shuffled(arrays, shuffled, d.sample_seed) if shuffled else arrays


def select_shuffled(arrays: Arrays, n: int, seed: int) -> Arrays:
    """``n`` samples as ``Dataset.shuffle(seed=seed).select(range(n))`` picks them (the same
    permutation, so the same rows in the same order): on label-sorted data the first n are
    one class."""
    idx = np.random.default_rng(seed).permutation(len(arrays))[:n]
    return replace(arrays, **{f.name: getattr(arrays, f.name)[idx] for f in fields(arrays)
                              if isinstance(getattr(arrays, f.name), np.ndarray)})


def check_labels(recipe: Recipe, ds: Any, split: str) -> None:
    """Label column present and in range (cheap; runs before the run directory exists)."""
    d = recipe.data
    if recipe.task != "sequence_classification":
        return
    if d.label_column not in ds.column_names:
        raise DataError(
            f"data.label_column: column {d.label_column!r} not in the {split} data; "
            f"its columns are {', '.join(ds.column_names)}"
        )
    limit = d.max_train_samples if split == "train" else d.max_eval_samples
    if d.sample_selection == "shuffled":
        limit = None  # any row may be drawn
    labels = column(ds, d.label_column)[:limit] if limit else column(ds, d.label_column)
    n = recipe.model.num_labels or 2
    bad = [(i, v) for i, v in enumerate(labels) if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 <= v < n]
    if bad:
        i, v = bad[0]
        what = (f"{v!r}, a string" if isinstance(v, str) else f"{v!r}, not an integer"
                if not isinstance(v, (int, np.integer)) or isinstance(v, bool) else f"{v!r}, outside 0..{n - 1}")
        raise DataError(
            f"data.label_column: {split} row {i} has label {what} ({len(bad)} bad row(s) in all); labels must be "
            f"integers below model.num_labels={n}, written as numbers in the data"
        )
