"""Deterministic batches over prepared arrays, sharded across ranks, resumable by position.

The order is a pure function of (seed, epoch): global batch k holds the same samples whatever
the world size, and each rank takes a strided share of it (rank r: samples r, r+W, r+2W, ...).
The position is counted in global samples within an epoch, so a resumed run, even at another
world size, continues with the very next sample and replays nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from clustertune.data.prepare import Arrays
from clustertune.errors import DataError


@dataclass
class Position:
    """Where the training data stands: epoch and samples consumed within it."""

    epoch: int = 0
    offset: int = 0
    samples_seen: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset, "samples_seen": self.samples_seen}

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> Position:
        return cls(int(d["epoch"]), int(d["offset"]), int(d["samples_seen"]))


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(n)
    return np.random.default_rng([seed, epoch]).permutation(n)


def to_batch(arrays: Arrays, idx: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
    """Gather rows into tensors on ``device`` (pinned + non-blocking copy on CUDA)."""
    ids = torch.from_numpy(arrays.input_ids[idx].astype(np.int64))
    batch = {"input_ids": ids}
    if arrays.attention_mask is None:
        batch["labels"] = ids
    else:
        batch["attention_mask"] = torch.from_numpy(arrays.attention_mask[idx].astype(np.int64))
        batch["labels"] = torch.from_numpy(arrays.labels[idx])
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    return {k: v.to(device) for k, v in batch.items()}


class TrainBatches:
    """Yields, per optimizer step, this rank's micro-batches (``accum`` of them)."""

    def __init__(self, arrays: Arrays, micro_batch: int, accum: int, rank: int, world: int, seed: int, shuffle: bool):
        self.arrays, self.micro, self.accum = arrays, micro_batch, accum
        self.rank, self.world, self.seed, self.shuffle = rank, world, seed, shuffle
        self.global_batch = micro_batch * accum * world
        self.steps_per_epoch = len(arrays) // self.global_batch
        if self.steps_per_epoch == 0:
            raise DataError(
                f"data: {len(arrays)} training samples are fewer than one global batch of {self.global_batch} "
                f"(train.batch_size x train.gradient_accumulation_steps x processes); lower the batch size or give more data"
            )

    def step_indices(self, pos: Position) -> tuple[list[np.ndarray], Position]:
        """This rank's micro-batch indices for the next step, and the position after it."""
        epoch, offset = pos.epoch, pos.offset
        if offset + self.global_batch > len(self.arrays):  # drop the epoch's last partial batch
            epoch, offset = epoch + 1, 0
        order = epoch_order(len(self.arrays), self.seed, epoch, self.shuffle)
        mine = order[offset : offset + self.global_batch][self.rank :: self.world]
        micro = [mine[i * self.micro : (i + 1) * self.micro] for i in range(self.accum)]
        return micro, Position(epoch, offset + self.global_batch, pos.samples_seen + self.global_batch)

    def iterate(self, pos: Position, device: torch.device) -> Iterator[tuple[list[dict[str, torch.Tensor]], Position]]:
        while True:
            micro, pos = self.step_indices(pos)
            yield [to_batch(self.arrays, m, device) for m in micro], pos


def eval_batches(arrays: Arrays, batch_size: int, rank: int, world: int, device: torch.device) -> Iterator[dict[str, torch.Tensor]]:
    """Every evaluation sample exactly once across ranks (strided), in order."""
    mine = np.arange(len(arrays))[rank::world]
    for i in range(0, len(mine), batch_size):
        yield to_batch(arrays, mine[i : i + batch_size], device)
