"""Rows of SFT examples: packed (best-fit decreasing) or one example per row, and their batches.

A split is stored as dense rows: ``input_ids``, ``loss_mask`` (1 where the token is a label),
``position_ids`` (restarting at 0 for every example in a row) and ``lengths`` (real tokens per
row; the rest is padding). Packed rows are ``max_length`` wide; unpacked ones as wide as the
split's longest example. A batch is cut to its longest row, so unpacked batches are padded to
the longest example in the batch, not to ``max_length``.

Packed rows carry no attention mask: transformers builds a block-diagonal causal mask from
``position_ids`` that restart, so an example attends only to itself. The padding at a row's
end is a segment of its own (positions restart there too) and carries no labels.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clustertune.data.prepare import Arrays

IGNORE_INDEX = -100


def best_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Bins of example indices, each holding at most ``capacity`` tokens: examples taken longest
    first (ties by index) go into the fullest bin that still has room. Deterministic."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, bin index), sorted
    for i in order:
        n = lengths[i]
        if n > capacity:
            raise ValueError(f"example {i} has {n} tokens, more than a row's {capacity}")
        k = bisect.bisect_left(free, (n, -1))
        if k == len(free):
            bins.append([i])
            room, b = capacity - n, len(bins) - 1
        else:
            room, b = free.pop(k)
            bins[b].append(i)
            room -= n
        bisect.insort(free, (room, b))
    return bins


@dataclass
class SFTArrays(Arrays):
    """One split of SFT rows (see the module doc); ``generation`` holds held-out prompts."""

    loss_mask: Any = None
    position_ids: Any = None
    lengths: Any = None
    packed: bool = False
    n_tokens: int = 0
    generation: list[dict[str, Any]] = field(default_factory=list)
    end_marker: str = ""

    @property
    def tokens(self) -> int:
        return self.n_tokens

    def batch_tensors(self, idx: np.ndarray) -> dict[str, Any]:
        """The rows ``idx`` as model inputs, cut to the longest of them."""
        import torch

        width = max(1, int(np.max(np.asarray(self.lengths)[idx])))
        ids = torch.from_numpy(np.asarray(self.input_ids[idx])[:, :width].astype(np.int64))
        mask = torch.from_numpy(np.asarray(self.loss_mask[idx])[:, :width].astype(bool))
        batch = {"input_ids": ids, "labels": torch.where(mask, ids, torch.full_like(ids, IGNORE_INDEX))}
        if self.packed:
            batch["position_ids"] = torch.from_numpy(np.asarray(self.position_ids[idx])[:, :width].astype(np.int64))
        else:
            lengths = torch.from_numpy(np.asarray(self.lengths[idx]).astype(np.int64))
            batch["attention_mask"] = (torch.arange(width)[None, :] < lengths[:, None]).long()
        return batch


def build_rows(ids: list[np.ndarray], masks: list[np.ndarray], max_length: int, packed: bool,
               pad_id: int, id_dtype: Any) -> SFTArrays:
    """Rows from examples (each at most ``max_length`` tokens): packed rows are ``max_length``
    wide; unpacked ones as wide as the longest example, since a batch is cut to its longest row."""
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    if packed:
        groups = best_fit_decreasing(lens.tolist(), max_length)
        width = max_length
    else:
        groups = [[i] for i in range(len(ids))]
        width = max(1, int(lens.max(initial=0)))
    n = len(groups)
    order = np.fromiter((i for g in groups for i in g), dtype=np.int64, count=len(ids))
    sizes = np.fromiter(map(len, groups), dtype=np.int64, count=n)
    row_of = np.repeat(np.arange(n), sizes)  # the row of each example, in ``order``
    ordered_lens = lens[order]
    ends = np.cumsum(ordered_lens)
    before = ends - ordered_lens  # tokens of all the examples before each one
    col0 = before - before[(np.cumsum(sizes) - sizes)[row_of]]  # its first column in its row
    # Every token's place in the flattened rows, and its position within its example.
    tok_example = np.repeat(np.arange(len(order)), ordered_lens)
    pos = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - np.repeat(before, ordered_lens)
    dest = row_of[tok_example] * width + col0[tok_example] + pos
    flat_ids = np.concatenate([ids[i] for i in order]) if len(order) else np.empty(0, np.int64)
    flat_mask = np.concatenate([masks[i] for i in order]) if len(order) else np.empty(0, np.uint8)
    lengths = np.bincount(row_of, weights=ordered_lens, minlength=n).astype(np.int32)
    pos_dtype = np.uint16 if width <= np.iinfo(np.uint16).max + 1 else np.int32
    input_ids = np.full(n * width, pad_id, dtype=id_dtype)
    input_ids[dest] = flat_ids
    loss_mask = np.zeros(n * width, dtype=np.uint8)
    loss_mask[dest] = flat_mask
    # Padding is a segment of its own: its positions restart at 0 after the row's last token.
    position_ids = np.empty((n, width), dtype=pos_dtype)
    np.subtract(np.arange(width)[None, :], lengths[:, None], out=position_ids, casting="unsafe")
    position_ids.reshape(-1)[dest] = pos
    return SFTArrays(input_ids=input_ids.reshape(n, width), loss_mask=loss_mask.reshape(n, width),
                     position_ids=position_ids, lengths=lengths,
                     packed=packed, n_tokens=int(lengths.sum()))


def write_generation(path: Any, arrays: SFTArrays) -> bytes:
    data = json.dumps({"end_marker": arrays.end_marker, "prompts": arrays.generation}).encode("utf-8")
    path.write_bytes(data)
    return data


def read_generation(path: Any) -> tuple[list[dict[str, Any]], str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], ""
    return list(data["prompts"]), str(data["end_marker"])
