"""Streaming: tokenize and pack on the fly, as one global stream of blocks.

For corpora too large to prepare. The texts are read in order, tokenized in chunks and cut
into ``block_size`` blocks exactly as :func:`clustertune.data.prepare.causal_lm_arrays` cuts
them (all ids concatenated, every full block, in order), so the same text gives the same
blocks, prepared or streamed; a test checks it.

Block ``g`` of the global stream belongs to rank ``g % world`` (the strided share of each
global batch, as for prepared data), and within a rank, to dataloader worker
``(j // batch) % workers`` for the rank's ``j``-th block (whole micro-batches per worker, so
PyTorch's round-robin over workers gives the rank its blocks in order). Every rank and worker
reads the whole text to know where blocks fall; each keeps only its own blocks.

A :class:`StreamState` (the text where the current chunk starts, the ids carried into it, at
most ``block_size - 1``, and the blocks already cut from it) resumes the stream exactly, also
at another world size; without one, ``start_block`` replays the tokenization (not the
training) up to that block.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clustertune.data import builtin
from clustertune.data.encode import TextEncoder, id_dtype, probe_sample, text_encoder
from clustertune.data.source_checks import text_lines
from clustertune.data.sources import _read_file

CHUNK_TEXTS = 1000


@dataclass
class StreamState:
    """Where the global block stream stands: enough to continue it exactly."""

    text_index: int = 0  # first text of the chunk being cut
    carry: list[int] = field(default_factory=list)  # ids carried into that chunk (< block_size)
    blocks_into_chunk: int = 0  # blocks already cut from (carry + chunk)
    block: int = 0  # global index of the next block

    def to_dict(self) -> dict[str, Any]:
        return {"text_index": self.text_index, "carry": list(self.carry),
                "blocks_into_chunk": self.blocks_into_chunk, "block": self.block}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamState:
        return cls(int(d["text_index"]), [int(x) for x in d["carry"]], int(d["blocks_into_chunk"]), int(d["block"]))


class BlockStream:
    """The global stream of blocks of ``texts()`` (a callable, so it can be read again)."""

    def __init__(self, texts: Callable[[], Iterable[str]], tokenizer: Any, block_size: int,
                 chunk_texts: int = CHUNK_TEXTS):
        self.texts, self.block_size, self.chunk_texts = texts, block_size, chunk_texts
        self.tokenizer, self.dtype = tokenizer, id_dtype(len(tokenizer))
        self._encoder: TextEncoder | None = None  # chosen (and checked) on the first chunk

    def _encoder_for(self, chunk: list[str]) -> TextEncoder:
        if self._encoder is None:
            self._encoder = text_encoder(self.tokenizer, probe_sample(chunk))
        return self._encoder

    def _chunks(self, start_text: int) -> Iterator[tuple[int, list[str]]]:
        it = iter(self.texts())
        if start_text:
            next(itertools.islice(it, start_text - 1, None), None)  # skip the texts before it
        i = start_text
        while chunk := [t if isinstance(t, str) else "" if t is None else str(t)
                        for t in itertools.islice(it, self.chunk_texts)]:
            yield i, chunk
            i += len(chunk)

    def _encode(self, chunk: list[str]) -> np.ndarray:
        return self._encoder_for(chunk).encode_flat(chunk)

    def blocks(self, state: StreamState | None = None,
               start_block: int = 0) -> Iterator[tuple[int, np.ndarray, StreamState]]:
        """``(global index, block, state after it)`` from ``state`` (or from ``start_block``, replayed)."""
        st = state or StreamState()
        bs = self.block_size
        for i, chunk in self._chunks(st.text_index):
            ids = self._encode(chunk)
            carried = list(st.carry)  # shared by the states of this chunk's blocks
            buf = np.concatenate([np.asarray(carried, dtype=ids.dtype), ids])
            n = len(buf) // bs
            first = st.blocks_into_chunk
            g = st.block
            for k in range(first, n):
                after = StreamState(i, carried, k + 1, g + 1)
                if g >= start_block:
                    yield g, buf[k * bs : (k + 1) * bs], after
                g += 1
            st = StreamState(i + len(chunk), buf[n * bs :].tolist(), 0, g)

    def shard(self, rank: int, world: int, worker: int = 0, workers: int = 1, batch: int = 1,
              state: StreamState | None = None, start_block: int = 0) -> Iterator[tuple[int, np.ndarray, StreamState]]:
        """This rank's (and dataloader worker's) blocks: global ``g`` with ``g % world == rank``,
        then every ``workers``-th micro-batch of ``batch`` of the rank's blocks."""
        for g, block, after in self.blocks(state, start_block):
            if g % world != rank:
                continue
            if ((g // world) // batch) % workers == worker:
                yield g, block, after


def texts_of_files(files: list[str], text_column: str = "text", keep_linebreaks: bool = True) -> Callable[[], Iterator[str]]:
    """Texts of local files read lazily, line by line for .txt/.jsonl (same rows as prepare)."""
    import json
    from pathlib import Path

    def gen() -> Iterator[str]:
        for f in files:
            p = Path(f).expanduser()
            suffix = p.suffix.lower()
            if suffix in (".txt", ".text"):
                with p.open(encoding="utf-8") as fh:
                    for line in fh:  # the same rows as prepare's sources.text_lines
                        yield from text_lines(line, keep_linebreaks)
            elif suffix == ".jsonl":
                with p.open(encoding="utf-8") as fh:
                    for line in fh:
                        if line.strip():
                            yield json.loads(line).get(text_column)
            else:  # csv, parquet, json arrays: read whole, then iterate
                ds = _read_file(p, "data.train_files")
                yield from ds.with_format("arrow")[text_column].to_pylist()

    return gen


def texts_of_source(d: Any) -> Callable[[], Iterator[str]]:
    """The training texts of a recipe's data section, read lazily, in order: local files line by
    line, a ``save_to_disk`` directory through Arrow batches, a hub dataset with
    ``streaming=True``, a builtin corpus from memory. No validation carve-out (streaming needs
    a validation split or files: carving one takes the whole dataset)."""
    from pathlib import Path

    if d.train_files:
        return texts_of_files(list(d.train_files), d.text_column, d.keep_linebreaks)
    name = d.dataset or ""
    if name.startswith(builtin.BUILTIN_PREFIX):
        rows = builtin.builtin_rows(builtin.short_name(name))
        return lambda: (str(r[d.text_column]) for r in rows)
    if Path(name).expanduser().is_dir():
        def from_disk() -> Iterator[str]:
            from datasets import DatasetDict, load_from_disk

            ds = load_from_disk(str(Path(name).expanduser()))
            if isinstance(ds, DatasetDict):
                ds = ds[d.train_split]
            for batch in ds.with_format("arrow").iter(batch_size=CHUNK_TEXTS):
                yield from batch[d.text_column].to_pylist()

        return from_disk

    def from_hub() -> Iterator[str]:
        import datasets

        ds = datasets.load_dataset(name, d.dataset_config, split=d.train_split, streaming=True,
                                   revision=d.dataset_revision)
        for row in ds:
            yield row.get(d.text_column)

    return from_hub


class StreamingDataset:
    """A ``torch.utils.data.IterableDataset`` of this rank's blocks (int64 tensors), sharded
    over the DataLoader's workers; ``state``/``start_block`` resume it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        import torch

        class _Impl(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
            def __init__(self, stream: BlockStream, rank: int, world: int, batch: int = 1,
                         state: StreamState | None = None, start_block: int = 0):
                self.stream, self.rank, self.world, self.batch = stream, rank, world, batch
                self.state, self.start_block = state, start_block

            def __iter__(self) -> Iterator[Any]:
                info = torch.utils.data.get_worker_info()
                worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
                for _, block, _ in self.stream.shard(self.rank, self.world, worker, workers, self.batch,
                                                     self.state, self.start_block):
                    yield torch.from_numpy(block.astype(np.int64))

        return _Impl(*args, **kwargs)
