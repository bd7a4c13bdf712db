"""Deterministic batches over prepared arrays, sharded across ranks, resumable by position.

The order is a pure function of (seed, epoch): global batch k holds the same samples whatever
the world size, and each rank takes a strided share of it (rank r: samples r, r+W, r+2W, ...).
The position is counted in global samples within an epoch, so a resumed run, even at another
world size, continues with the very next sample and replays nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from clustertune.data.prepare import Arrays
from clustertune.errors import DataError
from clustertune.data.stream import BlockStream
from clustertune.data.stream import StreamState


@dataclass
class Position:
    """Where the training data stands: epoch and samples consumed within it (and, for streamed
    data, the stream's state there, so a resume continues without re-reading the text)."""

    epoch: int = 0
    offset: int = 0
    samples_seen: int = 0
    stream: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"epoch": self.epoch, "offset": self.offset, "samples_seen": self.samples_seen}
        if self.stream is not None:
            d["stream"] = self.stream
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Position:
        return cls(int(d["epoch"]), int(d["offset"]), int(d["samples_seen"]), d.get("stream"))


# ``train.group_by_length`` sorts the epoch's order by length within runs of GROUP_RUN samples, cuts
# each sorted run into chunks of GROUP_CHUNK and takes the chunks in a shuffled order, the longest
# first. Constants, not multiples of the batch: the order must not depend on the world size, so that
# a run resumed on another number of ranks continues over the same samples. A global batch of up to
# GROUP_CHUNK rows (aligned) holds rows of one chunk; a larger one, several chunks' rows.
GROUP_RUN = 1024
GROUP_CHUNK = 64


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool, lengths: np.ndarray | None = None) -> np.ndarray:
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    if lengths is None:
        return order
    for start in range(0, n, GROUP_RUN):
        run = order[start:start + GROUP_RUN]
        run = run[np.argsort(-lengths[run], kind="stable")]  # equal lengths keep their shuffled order
        chunks = [run[i:i + GROUP_CHUNK] for i in range(0, len(run), GROUP_CHUNK)]
        # The longest chunk first (a batch too large for memory fails at the first step); the
        # others shuffled, so that a short run trains on short rows as well as long ones.
        rest = np.random.default_rng([seed, epoch, start]).permutation(len(chunks) - 1) + 1
        order[start:start + len(run)] = np.concatenate([chunks[0], *(chunks[i] for i in rest)])
    return order


def to_batch(arrays: Arrays, idx: np.ndarray, device: torch.device,
             ignore_from: int | None = None) -> dict[str, torch.Tensor]:
    """Gather rows into tensors on ``device`` (pinned + non-blocking copy on CUDA). Rows from
    ``ignore_from`` on are padding: their labels are -100, which every loss ignores."""
    if hasattr(arrays, "batch_tensors"):  # SFT rows: labels from the loss mask, cut to the longest row
        batch = arrays.batch_tensors(idx)
    else:
        batch = _lm_batch(arrays, idx)
    ids = batch["input_ids"]
    labels = batch.pop("labels", ids)
    if ignore_from is not None and ignore_from < len(idx):
        labels = labels.clone()
        labels[ignore_from:] = -100
    if labels is not ids:
        batch["labels"] = labels
    if device.type == "cuda":
        moved = {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    else:
        moved = {k: v.to(device) for k, v in batch.items()}
    moved.setdefault("labels", moved["input_ids"])  # causal LM: the model shifts them itself; copied once
    return moved


def _lm_batch(arrays: Arrays, idx: np.ndarray) -> dict[str, torch.Tensor]:
    ids = torch.from_numpy(arrays.input_ids[idx].astype(np.int64))
    batch = {"input_ids": ids}
    if arrays.attention_mask is not None:
        batch["attention_mask"] = torch.from_numpy(arrays.attention_mask[idx].astype(np.int64))
        batch["labels"] = torch.from_numpy(arrays.labels[idx])
    return batch


class TrainBatches:
    """Yields, per optimizer step, this rank's micro-batches (``accum`` of them)."""

    def __init__(self, arrays: Arrays, micro_batch: int, accum: int, rank: int, world: int, seed: int, shuffle: bool,
                 group_by_length: bool = False):
        self.arrays, self.micro, self.accum = arrays, micro_batch, accum
        self.rank, self.world, self.seed, self.shuffle = rank, world, seed, shuffle
        lengths = getattr(arrays, "lengths", None) if group_by_length else None
        self._lengths = None if lengths is None else np.asarray(lengths)
        self._order: tuple[int, np.ndarray] | None = None  # (epoch, its order): computed once per epoch
        self.global_batch = micro_batch * accum * world
        # Real (non-padding) tokens of the latest step's global batch, what tokens/s counts: the
        # average row's until a step is taken; each step's own where batches are grouped by length.
        self.step_tokens = self.global_batch * self.tokens_per_sample
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
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, epoch_order(len(self.arrays), self.seed, epoch, self.shuffle, self._lengths))
        order = self._order[1]
        if self._lengths is not None:  # grouped batches differ in length: the step's own count
            self.step_tokens = float(self._lengths[order[offset : offset + self.global_batch]].sum())
        mine = order[offset : offset + self.global_batch][self.rank :: self.world]
        micro = [mine[i * self.micro : (i + 1) * self.micro] for i in range(self.accum)]
        return micro, Position(epoch, offset + self.global_batch, pos.samples_seen + self.global_batch)

    def iterate(self, pos: Position, device: torch.device) -> Iterator[tuple[list[dict[str, torch.Tensor]], Position]]:
        while True:
            micro, pos = self.step_indices(pos)
            yield [to_batch(self.arrays, m, device) for m in micro], pos

    @property
    def seq_len(self) -> int:
        """Tokens per row (the last axis: a sample of pairs holds two rows)."""
        return int(self.arrays.input_ids.shape[-1])

    @property
    def tokens_per_sample(self) -> float:
        """Real (non-padding) tokens per sample on average: what tokens/s counts."""
        lengths = getattr(self.arrays, "lengths", None)
        return float(np.mean(lengths)) if lengths is not None and len(self.arrays) else float(self.seq_len)

    def epoch_of(self, pos: Position) -> float:
        return pos.samples_seen / len(self.arrays)


class StreamBatches:
    """Per optimizer step, this rank's micro-batches from a streamed corpus (``data.streaming``).

    Global batch k holds global blocks [kG, (k+1)G) of the stream, in order (no shuffling: the
    order is the text's), and rank r takes blocks r, r+W, ... of it, as for prepared data. The
    position carries the stream's state after the last block of the step, so a resume (at any
    world size) continues with the next block. When the text runs out the stream starts again
    (a new epoch), dropping the last partial global batch.
    """

    def __init__(self, stream: Any, micro_batch: int, accum: int, rank: int, world: int):
        self.stream, self.micro, self.accum, self.rank, self.world = stream, micro_batch, accum, rank, world
        self.global_batch = micro_batch * accum * world
        self.steps_per_epoch = None
        self.step_tokens = float(self.global_batch * stream.block_size)  # blocks: every token is real

    @property
    def seq_len(self) -> int:
        return int(self.stream.block_size)

    def epoch_of(self, pos: Position) -> float:
        return float(pos.epoch)

    def _epoch(self, pos: Position) -> Iterator[tuple[np.ndarray, Position]]:
        state = StreamState.from_dict(pos.stream) if pos.stream else None
        start = 0 if state is not None else pos.offset  # no saved state: replay the text up to it
        epoch, offset, seen = pos.epoch, pos.offset, pos.samples_seen
        base = state.block if state is not None else start  # global batches start here (any world size)
        mine: list[np.ndarray] = []
        for g, block, after in self.stream.blocks(state, start):
            if (g - base) % self.world == self.rank:
                mine.append(block)
            if (g + 1 - base) % self.global_batch == 0:
                offset, seen = offset + self.global_batch, seen + self.global_batch
                yield np.stack(mine), Position(epoch, offset, seen, after.to_dict())
                mine = []

    def iterate(self, pos: Position, device: torch.device,
                prefetch: int = 2) -> Iterator[tuple[list[dict[str, torch.Tensor]], Position]]:
        """Tokenizing and packing run in a background thread, ``prefetch`` steps ahead (0: in
        this thread), so the training step does not wait for the text between steps."""
        for blocks, at in prefetched(self._steps(pos), prefetch):
            arrays = Arrays(input_ids=blocks)
            micro = [np.arange(i * self.micro, (i + 1) * self.micro) for i in range(self.accum)]
            yield [to_batch(arrays, m, device) for m in micro], at

    def _steps(self, pos: Position) -> Iterator[tuple[np.ndarray, Position]]:
        per_rank = self.micro * self.accum
        while True:
            produced = False
            for blocks, pos in self._epoch(pos):  # noqa: B020  (pos advances with the stream)
                produced = True
                yield blocks, pos
            if not produced and pos.offset == 0:
                raise DataError(
                    f"data: the streamed text holds fewer than one global batch of {self.global_batch} blocks "
                    f"({per_rank} per process); lower the batch size or give more text"
                )
            pos = Position(pos.epoch + 1, 0, pos.samples_seen, None)


def prefetched(items: Iterator[Any], depth: int) -> Iterator[Any]:
    """``items`` produced by a daemon thread up to ``depth`` ahead of the consumer (the
    tokenizer releases the GIL while it encodes); its exceptions are raised here. Closing
    this generator stops the thread at its next item and waits for it: a thread still inside
    native code when the interpreter finalizes can abort the process at exit."""
    if depth <= 0:
        yield from items
        return
    import queue
    import threading

    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:  # handed to the consumer, raised in its thread
            q.put(("error", exc))

    worker = threading.Thread(target=work, name="clustertune-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        worker.join(timeout=30)  # it finishes the item in hand, then sees the flag within 0.1 s


def make_train_batches(train: Any, micro_batch: int, accum: int, rank: int, world: int, seed: int,
                       shuffle: bool, group_by_length: bool = False) -> TrainBatches | StreamBatches:
    """Batches over prepared arrays, or over a stream when the data is streamed."""

    if isinstance(train, BlockStream):
        return StreamBatches(train, micro_batch, accum, rank, world)
    return TrainBatches(train, micro_batch, accum, rank, world, seed, shuffle, group_by_length)


def eval_batches(arrays: Arrays, batch_size: int, rank: int, world: int,
                 device: torch.device) -> Iterator[tuple[dict[str, torch.Tensor], int]]:
    """Every evaluation sample exactly once across ranks (strided), in order, as pairs of a
    batch and how many of its rows are real samples.

    Every rank gets the same number of batches, all of one shape: under FSDP and ZeRO-3 each
    forward is a collective, so a rank with a batch fewer would leave the others waiting in
    it; one shape also spares a compiled model a recompile for a short last batch. Rows past
    a rank's share repeat a sample with every label -100, so the loss ignores them.
    """
    n = len(arrays)
    per_rank = -(-n // world)  # the largest share; the others are padded up to it
    if per_rank == 0:
        return
    size = min(batch_size, per_rank)
    mine = np.arange(n)[rank::world]
    for i in range(0, per_rank, size):
        real = mine[i : i + size]
        filler = np.full(size - len(real), real[0] if len(real) else 0, dtype=mine.dtype)
        yield to_batch(arrays, np.concatenate([real, filler]), device, ignore_from=len(real)), len(real)
