"""Token ids and loss masks of rendered conversations.

A token is trained when it holds a character of a trained span: from the token holding the
span's first character to the token holding its last. Two ways give exactly that:

- Segments (fast, exact by construction): each conversation is cut at its spans' edges into
  segments; the whole texts and all the segments are encoded with gigatoken, in two batches.
  Where a conversation's segments' ids, concatenated, are its whole text's ids, every span
  edge is a token boundary, so the tokens of the trained segments are the trained tokens.
- Offsets: the tokenizer's Rust encoder with each token's character span, for conversations
  whose segments do not agree (a span edge inside a token, as when a marker is plain text),
  and for every conversation when gigatoken cannot stand in for the tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from clustertune.errors import DataError

_BATCH = 1000
# Conversations encoded per call of :func:`by_segments`: bounds the per-token arrays it holds.
CONVERSATIONS_PER_CALL = 50_000


class Spanned(Protocol):
    text: str
    spans: list[tuple[int, int]]


def encode_with_offsets(texts: list[str], tokenizer: Any, workers: int = 1) -> list[tuple[list[int], np.ndarray]]:
    """Ids of each text (no special tokens added: the template writes its own) and the
    character span of each token."""
    if not getattr(tokenizer, "is_fast", False):
        raise DataError("model.tokenizer: task sft needs a fast (Rust) tokenizer for character offsets; "
                        "load one with a tokenizer.json")
    from concurrent.futures import ThreadPoolExecutor

    from tokenizers import Tokenizer

    # The Rust encoder itself (transformers' wrapper converts every encoding to Python objects
    # first), on threads over chunks: it releases the GIL.
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()

    def encode(chunk: list[str]) -> list[tuple[list[int], np.ndarray]]:
        return [(e.ids, np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2))
                for e in backend.encode_batch(chunk, add_special_tokens=False)]

    chunks = [texts[i : i + _BATCH] for i in range(0, len(texts), _BATCH)]
    with ThreadPoolExecutor(max(1, min(workers, len(chunks))), thread_name_prefix="clustertune-sft") as ex:
        return [x for part in ex.map(encode, chunks) for x in part]


def span_mask(offsets: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """1 for the tokens from the one holding a span's first character to the one holding its last."""
    mask = np.zeros(len(offsets), dtype=np.uint8)
    if len(offsets) == 0:
        return mask
    starts, ends = offsets[:, 0], np.maximum.accumulate(offsets[:, 1])
    for s, e in spans:
        if e <= s:
            continue
        first = int(np.searchsorted(ends, s, side="right"))
        last = int(np.searchsorted(starts, e - 1, side="right")) - 1
        mask[first : last + 1] = 1
    return mask


def by_offsets(rendered: Sequence[Spanned], tokenizer: Any, workers: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each conversation's ids and loss mask through the tokenizer's character offsets."""
    encoded = encode_with_offsets([r.text for r in rendered], tokenizer, workers)
    return [(np.asarray(ids, dtype=np.int64), span_mask(offs, r.spans)) for r, (ids, offs) in zip(rendered, encoded)]


def segments(rendered: Sequence[Spanned]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every conversation cut at its spans' edges: the segments in order, whether each is
    trained (uint8), and how many segments each conversation has. Overlapping spans count as
    their union; empty segments are left out."""
    pieces: list[str] = []
    trained: list[int] = []
    counts = np.zeros(len(rendered), dtype=np.int64)
    for i, r in enumerate(rendered):
        text, at, before = r.text, 0, len(pieces)
        for s, e in sorted(r.spans):
            s, e = max(s, at), min(e, len(text))
            if e <= s:
                continue
            if s > at:
                pieces.append(text[at:s])
                trained.append(0)
            pieces.append(text[s:e])
            trained.append(1)
            at = e
        if at < len(text):
            pieces.append(text[at:])
            trained.append(0)
        counts[i] = len(pieces) - before
    return pieces, np.asarray(trained, dtype=np.uint8), counts


def by_segments(rendered: Sequence[Spanned], encoder: Any) -> tuple[list[np.ndarray | None], list[np.ndarray | None]]:
    """Each conversation's ids and loss mask from segments encoded with ``encoder`` (a
    :class:`~clustertune.data.encode.TextEncoder` giving the tokenizer's ids without special
    tokens added); None for a conversation whose segments do not agree with its whole text."""
    n = len(rendered)
    whole, whole_len = encoder.encode([r.text for r in rendered])
    pieces, trained, counts = segments(rendered)
    parts, part_len = encoder.encode(pieces)
    conv_of_piece = np.repeat(np.arange(n), counts)
    summed = np.bincount(conv_of_piece, weights=part_len, minlength=n).astype(np.int64)
    lens = whole_len.tolist()
    agree = summed == whole_len
    # Tokens of the conversations whose lengths agree line up one to one: compare them.
    tok_conv = np.repeat(np.arange(n), whole_len)
    keep_whole = agree[tok_conv]
    keep_parts = agree[np.repeat(conv_of_piece, part_len)]
    mask = np.repeat(trained, part_len)[keep_parts]
    differ = whole[keep_whole] != parts[keep_parts]
    if differ.any():
        agree[np.unique(tok_conv[keep_whole][differ])] = False
    ends = np.cumsum(whole_len).tolist()
    kept_ends = np.cumsum(np.where(summed == whole_len, whole_len, 0)).tolist()
    ids: list[np.ndarray | None] = [None] * n
    masks: list[np.ndarray | None] = [None] * n
    for i in np.flatnonzero(agree).tolist():
        ids[i] = whole[ends[i] - lens[i]: ends[i]]
        masks[i] = mask[kept_ends[i] - lens[i]: kept_ends[i]]
    return ids, masks


def ids_and_masks(rendered: Sequence[Spanned], tokenizer: Any, encoder: Any = None,
                  workers: int = 1) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Every conversation's ids and loss mask (see the module doc) and how many went through
    the offsets. ``encoder``: a gigatoken :class:`~clustertune.data.encode.TextEncoder`
    checked against the tokenizer, or None for the offsets alone."""
    if encoder is None or encoder.engine != "gigatoken":
        out = by_offsets(rendered, tokenizer, workers)
        return [i for i, _ in out], [m for _, m in out], len(out)
    ids: list[np.ndarray | None] = []
    masks: list[np.ndarray | None] = []
    for at in range(0, len(rendered), CONVERSATIONS_PER_CALL):
        part_ids, part_masks = by_segments(rendered[at: at + CONVERSATIONS_PER_CALL], encoder)
        ids += part_ids
        masks += part_masks
    rest = [i for i, x in enumerate(ids) if x is None]
    if rest:
        for i, (x, m) in zip(rest, by_offsets([rendered[i] for i in rest], tokenizer, workers)):
            ids[i], masks[i] = x, m
    return ids, masks, len(rest)  # type: ignore[return-value]
