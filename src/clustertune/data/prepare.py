"""Turn raw examples into training arrays.

- causal LM (``run_clm.py`` semantics): tokenize every text, concatenate the whole split once,
  cut into ``block_size`` blocks, drop the one global remainder; labels are the inputs (the
  model shifts them). The result does not depend on batch or worker counts: it equals
  ``run_clm.py``'s with the whole split as one map batch (``num_proc=1, batch_size=None``).
- classification: truncate and pad every example to ``max_length``; labels as class ids
  (:mod:`clustertune.data.labels`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from clustertune.data.encode import encode_flat, encode_texts, id_dtype
from clustertune.data.labels import LabelSet, infer_labels, label_ids
from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

__all__ = ["Arrays", "encode_flat", "encode_texts", "causal_lm_arrays", "classification_arrays", "prepare_split",
           "column"]
_BATCH = 1000
log = logging.getLogger("clustertune")


@dataclass
class Arrays:
    """One split as dense arrays; ``attention_mask``/``labels`` only for classification."""

    input_ids: np.ndarray
    attention_mask: np.ndarray | None = None
    labels: np.ndarray | None = None
    cut: dict[str, int] = field(default_factory=dict)
    """Classification: what ``max_length`` cut (see :func:`clustertune.data.truncation.check_truncation`)."""
    rows_cut: np.ndarray | None = None
    """Classification: whether ``max_length`` cut each row (a shape whose example is several rows
    counts an example as cut when any of its rows is)."""

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def tokens(self) -> int:
        if self.attention_mask is not None:
            return int(self.attention_mask.sum())
        return int(self.input_ids.size)


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
    """Padded/truncated ids, attention mask and class ids (labels already checked by infer_labels)."""
    if limit is not None:
        texts, labels = texts[:limit], labels[:limit]
    if not texts:
        raise DataError(f"data: the {split} split has no examples")
    ids = np.zeros((len(texts), max_length), dtype=id_dtype(len(tokenizer)))
    mask = np.zeros((len(texts), max_length), dtype=np.uint8)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids[:] = pad
    cut = {"examples_read": len(texts), "truncated": 0, "tokens_before_cut": 0, "tokens_cut": 0, "longest": 0}
    rows_cut = np.zeros(len(texts), dtype=bool)
    added = tokenizer.num_special_tokens_to_add()
    for start in range(0, len(texts), _BATCH):
        batch = texts[start : start + _BATCH]
        enc = tokenizer(batch, truncation=True, max_length=max_length, verbose=False)
        # A fast tokenizer keeps what truncation cut (each piece with its own special tokens); a
        # slow one is asked for the whole lengths.
        over = ([sum(len(o.ids) - added for o in e.overflowing) for e in enc.encodings] if enc.encodings
                else [max(0, len(w) - len(r)) for w, r in zip(tokenizer(batch, verbose=False)["input_ids"],
                                                              enc["input_ids"])])
        for j, row in enumerate(enc["input_ids"]):
            ids[start + j, : len(row)] = row
            mask[start + j, : len(row)] = 1
            cut["truncated"] += over[j] > 0
            rows_cut[start + j] = over[j] > 0
            cut["tokens_cut"] += over[j]
            cut["tokens_before_cut"] += len(row) + over[j]
            cut["longest"] = max(cut["longest"], len(row) + over[j])
    return Arrays(input_ids=ids, attention_mask=mask, labels=np.asarray(labels, dtype=np.int64), cut=cut,
                  rows_cut=rows_cut)


def column(ds: Any, name: str) -> list[Any]:
    """One column of a ``datasets.Dataset`` as a list, in row order (selections included), read
    through Arrow: iterating ``ds[name]`` goes row by row through the formatter, ~300x slower."""
    return ds.with_format("arrow")[name].to_pylist()


def prepare_split(recipe: Recipe, ds: Any, tokenizer: Any, split: str, workers: int = 1,
                  labels: LabelSet | None = None) -> Arrays:
    """One split's arrays; classification needs the run's ``labels`` (see ``infer_labels``)."""
    d = recipe.data
    texts = [t if isinstance(t, str) else "" if t is None else str(t) for t in column(ds, d.text_column)]
    limit = d.max_train_samples if split == "train" else d.max_eval_samples
    shuffled, limit = (limit, None) if d.sample_selection == "shuffled" else (None, limit)
    if recipe.traits.packed:
        arrays = causal_lm_arrays(texts, tokenizer, d.block_size, limit, split, workers)
    else:
        labels = labels or infer_labels(recipe, {split: ds})
        values = column(ds, d.label_column)
        ids = label_ids(labels, values[:limit] if limit is not None else values)  # the rows kept: checked
        arrays = classification_arrays(texts, list(ids), tokenizer, d.max_length, limit, split)
    return select_shuffled(arrays, shuffled, d.sample_seed) if shuffled else arrays


def select_shuffled(arrays: Arrays, n: int, seed: int) -> Arrays:
    """``n`` samples as ``Dataset.shuffle(seed=seed).select(range(n))`` picks them (the same
    permutation, so the same rows in the same order): on label-sorted data the first n are
    one class."""
    idx = np.random.default_rng(seed).permutation(len(arrays))[:n]
    return replace(arrays, **{f.name: getattr(arrays, f.name)[idx] for f in fields(arrays)
                              if isinstance(getattr(arrays, f.name), np.ndarray)})
