"""Rows of SFT examples: packed (best-fit decreasing) or one example per row, and their batches.

A split is stored as dense rows of ``max_length``: ``input_ids``, ``loss_mask`` (1 where the
token is a label), ``position_ids`` (restarting at 0 for every example in a row) and
``lengths`` (real tokens per row; the rest is padding). A batch is cut to its longest row, so
unpacked batches are padded to the longest example in the batch, not to ``max_length``.

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
    """Rows of ``max_length`` from examples (each at most ``max_length`` tokens)."""
    groups = best_fit_decreasing([len(x) for x in ids], max_length) if packed else [[i] for i in range(len(ids))]
    n = len(groups)
    input_ids = np.full((n, max_length), pad_id, dtype=id_dtype)
    loss_mask = np.zeros((n, max_length), dtype=np.uint8)
    pos_dtype = np.uint16 if max_length <= np.iinfo(np.uint16).max + 1 else np.int32
    position_ids = np.zeros((n, max_length), dtype=pos_dtype)
    lengths = np.zeros(n, dtype=np.int32)
    for r, group in enumerate(groups):
        at = 0
        for i in group:
            k = len(ids[i])
            input_ids[r, at : at + k] = ids[i]
            loss_mask[r, at : at + k] = masks[i]
            position_ids[r, at : at + k] = np.arange(k)
            at += k
        position_ids[r, at:] = np.arange(max_length - at)  # padding: a segment of its own
        lengths[r] = at
    return SFTArrays(input_ids=input_ids, loss_mask=loss_mask, position_ids=position_ids, lengths=lengths,
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
