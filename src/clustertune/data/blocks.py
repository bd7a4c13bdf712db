"""Cut a stream of token ids into blocks and write them as shards while they come.

A causal-LM split is all its texts' ids concatenated and cut into ``block_size`` rows, the one
remainder dropped (``run_clm.py``'s ``group_texts`` over the whole split). :class:`BlockWriter`
does that on ids handed to it a chunk at a time: full rows go straight to the current shard
file (hashed as they are written), at most ``block_size - 1`` ids wait for the next chunk. So
the memory a split needs is one chunk's ids, whatever the corpus size, and the files and
manifest entries are byte for byte those of writing the whole array at once
(:func:`clustertune.data.manifest.write_array`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clustertune.data.manifest import XXH3, shard_bytes
from clustertune.errors import DataError
from clustertune.fsutil import fsync_open


class _Shard:
    """One open shard file and its running checksums."""

    def __init__(self, path: Path):
        import xxhash

        self.path, self.rows, self.bytes = path, 0, 0
        self.fh = open(path, "wb")
        self.sha, self.xxh = hashlib.sha256(), xxhash.xxh3_128()

    def write(self, rows: np.ndarray) -> None:
        view = memoryview(np.ascontiguousarray(rows)).cast("B")
        self.fh.write(view)
        self.sha.update(view)
        self.xxh.update(view)
        self.rows += len(rows)
        self.bytes += len(view)

    def close(self) -> dict[str, Any]:
        fsync_open(self.fh)
        self.fh.close()
        return {"bytes": self.bytes, "sha256": self.sha.hexdigest(), XXH3: self.xxh.hexdigest()}


class BlockWriter:
    """Rows of ``block_size`` ids written as shards ``<stem>.NNNNN.bin`` under ``out_dir`` (at
    most ``limit`` rows); :meth:`close` records them in ``files`` and returns the array's
    manifest entry."""

    def __init__(self, out_dir: Path, stem: str, block_size: int, dtype: Any, files: dict[str, dict[str, Any]],
                 limit: int | None = None):
        self.out_dir, self.stem, self.block_size, self.files = out_dir, stem, block_size, files
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.limit = limit
        self.rows_per_shard = max(1, shard_bytes() // (self.dtype.itemsize * block_size))
        self.rows = 0
        self.seconds = 0.0  # spent writing and hashing
        self._carry = np.empty(0, self.dtype)
        self._shards: list[dict[str, Any]] = []
        self._shard: _Shard | None = None

    @property
    def full(self) -> bool:
        """Whether ``limit`` rows are written (more ids would be dropped)."""
        return self.limit is not None and self.rows >= self.limit

    def add(self, ids: np.ndarray) -> None:
        """Append ids; every row they complete is written now."""
        if self.full:
            return
        buf = np.concatenate([self._carry, ids.astype(self.dtype, copy=False)]) if len(self._carry) else ids
        n = len(buf) // self.block_size
        if self.limit is not None:
            n = min(n, self.limit - self.rows)
        rows = buf[: n * self.block_size].reshape(n, self.block_size).astype(self.dtype, copy=False)
        self._carry = np.array(buf[n * self.block_size:], dtype=self.dtype)  # a copy: frees the chunk
        t0 = time.perf_counter()
        while len(rows):
            shard = self._open()
            take = rows[: self.rows_per_shard - shard.rows]
            shard.write(take)
            self.rows += len(take)
            rows = rows[len(take):]
            if shard.rows == self.rows_per_shard:
                self._seal()
        self.seconds += time.perf_counter() - t0

    def _open(self) -> _Shard:
        if self._shard is None:
            name = f"{self.stem}.{len(self._shards):05d}.bin"
            self._shard = _Shard(self.out_dir / name)
        return self._shard

    def _seal(self) -> None:
        assert self._shard is not None
        name = self._shard.path.name
        self.files[name] = self._shard.close()
        self._shards.append({"file": name, "rows": self._shard.rows})
        self._shard = None

    def close(self) -> dict[str, Any]:
        """Seal the last shard (an empty one when no row was written, like ``write_array``)."""
        if self._shard is not None or not self._shards:
            self._open()
            self._seal()
        return {"dtype": self.dtype.str, "shape": [self.rows, self.block_size], "shards": self._shards}


def write_causal_lm_split(chunks: Iterable[Sequence[str]], encoder: Callable[[Sequence[str]], Any], out_dir: Path,
                          split: str, block_size: int, limit: int | None,
                          files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Encode ``chunks`` of texts with ``encoder(chunk)`` (a :class:`~clustertune.data.encode.TextEncoder`
    for that chunk) and write the split's blocks as they come; its manifest entry, with the
    seconds spent writing under ``"write_seconds"``."""
    writer: BlockWriter | None = None
    examples = 0
    for chunk in chunks:
        examples += len(chunk)
        enc = encoder(chunk)
        if writer is None:
            writer = BlockWriter(out_dir, f"{split}.input_ids", block_size, enc.dtype, files, limit)
        if not writer.full:  # past max samples the rows are only counted, like the in-memory examples
            writer.add(enc.encode_flat(chunk))
    if writer is None or writer.rows == 0:
        raise DataError(
            f"data: the {split} text has fewer tokens than one block of {block_size}; "
            "lower data.block_size or give more text"
        )
    return {"examples": examples, "samples": writer.rows, "tokens": writer.rows * block_size,
            "arrays": {"input_ids": writer.close()}, "write_seconds": writer.seconds}


def discard_split(out_dir: Path, split: str, files: dict[str, dict[str, Any]]) -> None:
    """Remove what an abandoned :func:`write_causal_lm_split` of ``split`` wrote."""
    for p in out_dir.glob(f"{split}.input_ids.*.bin"):
        files.pop(p.name, None)
        p.unlink()
