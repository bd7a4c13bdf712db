"""Turn raw examples into training arrays.

- causal LM (``run_clm.py`` semantics): tokenize every text, concatenate the whole split once,
  cut into ``block_size`` blocks, drop the one global remainder; labels are the inputs (the
  model shifts them). The result does not depend on batch or worker counts: it equals
  ``run_clm.py``'s with the whole split as one map batch (``num_proc=1, batch_size=None``).
- classification: truncate and pad every example to ``max_length``; integer labels checked
  against ``num_labels``.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

_BATCH = 1000
_MIXED_CHUNK = 256  # texts per unit of work in _encode_mixed
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


def _id_dtype(vocab: int) -> Any:
    """The smallest integer type that holds every id: 2 bytes up to 65,536 tokens, else 4."""
    return np.uint16 if vocab <= np.iinfo(np.uint16).max + 1 else np.int32


@contextmanager
def _tokenizers_single_threaded() -> Iterator[None]:
    """Each call encodes on one thread: parallelism comes from our worker threads (the Rust
    encoder releases the GIL), not from rayon, which is slower here and warns after a fork."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def encode_flat(texts: list[str], tokenizer: Any, workers: int = 1) -> np.ndarray:
    """All texts' token ids concatenated in order, as one array of the smallest id dtype.

    Exactly the ids of ``tokenizer(texts)["input_ids"]`` (special tokens included, no
    truncation or padding). Byte-level BPE tokenizers of GPT-2's shape encode ASCII texts by
    pre-token lookups (:mod:`clustertune.data.piece_cache`) on this thread while the Rust
    encoder takes every other text on ``workers`` threads; other tokenizers use the Rust
    encoder directly on ``workers`` threads.
    """
    from tokenizers import Tokenizer

    dtype = _id_dtype(len(tokenizer))
    if not getattr(tokenizer, "is_fast", False):  # slow tokenizers: the transformers call
        ids = encode_texts(texts, tokenizer)
        return np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=sum(len(x) for x in ids))
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    from clustertune.data.piece_cache import piece_encoder

    with _tokenizers_single_threaded():
        fast = piece_encoder(backend, probe=texts[:256])
        if fast is None:
            return np.concatenate([_flat(p, dtype) for p in _rust_encode(backend, texts, workers)] or [np.empty(0, dtype)])
        return _encode_mixed(fast, backend, texts, workers, dtype)


def _flat(ids: list[list[int]], dtype: Any) -> np.ndarray:
    return np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=sum(map(len, ids)))


def _encode_range(backend: Any, texts: list[str], dtype: Any) -> np.ndarray:
    return _flat([e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=True)], dtype)


def _rust_encode(backend: Any, texts: list[str], workers: int) -> list[list[list[int]]]:
    """Per-text ids from the Rust encoder, in ``texts`` order, as a few consecutive parts."""
    from concurrent.futures import ThreadPoolExecutor

    n = len(texts)
    workers = max(1, min(workers, n // 64 or 1))
    chunks = workers * 4 if workers > 1 else 1
    parts_in = [texts[i * n // chunks : (i + 1) * n // chunks] for i in range(chunks)]

    def encode(part: list[str]) -> list[list[int]]:
        return [e.ids for e in backend.encode_batch_fast(part, add_special_tokens=True)]

    if workers == 1:
        return [encode(p) for p in parts_in]
    with ThreadPoolExecutor(workers, thread_name_prefix="clustertune-tokenize") as ex:
        return list(ex.map(encode, parts_in))


def _encode_mixed(fast: Any, backend: Any, texts: list[str], workers: int, dtype: Any) -> np.ndarray:
    """Chunks of texts taken in turn by this thread (pre-token lookups) and ``workers - 1`` Rust
    encoder threads (which release the GIL), so both kinds of work run at once and whichever is
    faster on this corpus does more of it. Chunks are reassembled in order."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    size = _MIXED_CHUNK
    jobs = iter(range(0, len(texts), size))
    lock = threading.Lock()
    done: dict[int, np.ndarray] = {}

    def take() -> int | None:
        with lock:
            return next(jobs, None)

    def by_rust() -> None:
        while (start := take()) is not None:
            done[start] = _encode_range(backend, texts[start : start + size], dtype)

    def by_lookup() -> None:
        while (start := take()) is not None:
            out: list[int] = []
            for text in texts[start : start + size]:
                if fast.eligible(text):
                    fast.extend(out, text)
                else:
                    out += backend.encode(text, add_special_tokens=True).ids
            done[start] = np.array(out, dtype=dtype)

    helpers = max(0, workers - 1)
    with ThreadPoolExecutor(max(1, helpers), thread_name_prefix="clustertune-tokenize") as ex:
        rust = [ex.submit(by_rust) for _ in range(helpers)]
        by_lookup()
        for f in rust:
            f.result()
    log.debug("data: tokenized %d texts (%d distinct pre-tokens encoded by the model)", len(texts), fast.misses)
    return np.concatenate([done[k] for k in sorted(done)]) if done else np.empty(0, dtype)


def encode_texts(texts: list[str], tokenizer: Any) -> list[list[int]]:
    """Token ids per text, in batches (the fast tokenizer parallelises inside a batch)."""
    out: list[list[int]] = []
    for i in range(0, len(texts), _BATCH):
        enc = tokenizer(texts[i : i + _BATCH], verbose=False)
        out.extend(enc["input_ids"])
    return out


def group_blocks(ids_per_text: list[list[int]], block_size: int, vocab: int) -> np.ndarray:
    """Concatenate all ids and cut into full blocks; the remainder (< block_size) is dropped."""
    total = sum(len(x) for x in ids_per_text)
    flat = np.empty(total, dtype=_id_dtype(vocab))
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
    ids = np.zeros((len(texts), max_length), dtype=_id_dtype(len(tokenizer)))
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
        raise DataError(
            f"data.label_column: {split} row {i} has label {v!r}, outside 0..{n - 1} "
            f"({len(bad)} bad row(s) in all); labels must be integers below model.num_labels={n}"
        )
