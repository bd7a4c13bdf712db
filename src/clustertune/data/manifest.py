"""The on-disk format of prepared data: shard files and ``manifest.json``; memory-mapped reading.

A prepared directory ``<cache_root>/<fingerprint>/`` holds, per split, one or more raw
little-endian shard files per array (``train.input_ids.00000.bin``: rows of token ids in the
smallest unsigned integer type that holds the vocabulary), the tokenizer (``tokenizer/``) and
``manifest.json``: the fingerprint and its inputs, every file with its byte size, sha256 and
XXH3-128 (the fast checksum staging checks), per-split example, sample and token counts,
shapes and dtypes. The manifest is written last.

Reading maps the shards (``np.memmap``, zero-copy); a split whose array spans several shards is
read through :class:`ShardedArray`, which gathers rows by global index.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from clustertune.data.manifest_records import ArraySpec, FileEntry, ManifestRecord, SplitRecord
from clustertune.data.prepare import Arrays
from clustertune.errors import DataError
from clustertune.fsutil import atomic_write_json, fsync_file, fsync_open, sha256_file, xxh3_file
from clustertune.recipe.task_traits import traits_of

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
# Key of a file's XXH3-128 in its manifest entry; entries written before it existed have only sha256.
XXH3 = "xxh3_128"
TOKENIZER_DIR = "tokenizer"
SHARD_BYTES_ENV = "CLUSTERTUNE_SHARD_BYTES"
DEFAULT_SHARD_BYTES = 256 << 20


def shard_bytes() -> int:
    return int(os.environ.get(SHARD_BYTES_ENV) or DEFAULT_SHARD_BYTES)


def write_array(out_dir: Path, stem: str, arr: np.ndarray, files: dict[str, dict[str, Any]],
                unsynced: list[Path] | None = None) -> dict[str, Any]:
    """Write ``arr`` as shards ``<stem>.NNNNN.bin`` (row-aligned, little-endian); record them in
    ``files``. Each is flushed to disk, or, given ``unsynced``, listed there for the caller to
    flush (:func:`~clustertune.fsutil.fsync_all`) before it writes the manifest."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    row_bytes = max(1, arr.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64)))
    rows_per = max(1, shard_bytes() // row_bytes)
    shards = []
    for i, start in enumerate(range(0, max(len(arr), 1), rows_per)):
        part = arr[start : start + rows_per]
        name = f"{stem}.{i:05d}.bin"
        view = memoryview(part).cast("B")
        with open(out_dir / name, "wb") as fh:
            fh.write(view)
            if unsynced is None:
                fsync_open(fh)
        if unsynced is not None:
            unsynced.append(out_dir / name)
        files[name] = file_entry(view)
        shards.append({"file": name, "rows": len(part)})
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "shards": shards}


def file_entry(data: bytes | memoryview) -> dict[str, Any]:
    """A file's manifest entry: size, sha256 (what ``cache verify`` checks) and XXH3-128 (what
    staging checks on every copy, fast enough to keep up with the copy itself)."""
    import xxhash

    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            XXH3: xxhash.xxh3_128(data).hexdigest()}


def add_files(root: Path, sub: Path, files: dict[str, dict[str, Any]], unsynced: list[Path] | None = None) -> None:
    """Record every file under ``root/sub`` (e.g. the tokenizer) with its manifest entry, each
    flushed to disk (or listed in ``unsynced``, as :func:`write_array` does)."""
    for p in sorted((root / sub).rglob("*")):
        if p.is_file():
            if unsynced is None:
                fsync_file(p)
            else:
                unsynced.append(p)
            files[str(p.relative_to(root))] = file_entry(p.read_bytes())


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> None:
    ManifestRecord.model_validate(manifest)  # what every reader expects, checked before it is written
    atomic_write_json(out_dir / MANIFEST, manifest, fsync=True)


def force_hint(fp: str) -> str:
    return f"rebuild it with `clustertune prepare RECIPE --force` (or `clustertune cache rm {fp}`)"


@dataclass
class Manifest:
    """A parsed ``manifest.json`` (typed: :class:`ManifestRecord`) and the directory it describes."""

    dir: Path
    record: ManifestRecord

    @property
    def path(self) -> Path:
        return self.dir / MANIFEST

    @property
    def fingerprint(self) -> str:
        return self.record.fingerprint

    @property
    def files(self) -> dict[str, FileEntry]:
        return self.record.files

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files.values())

    @property
    def tokenizer_dir(self) -> Path:
        return self.dir / TOKENIZER_DIR

    def split(self, name: str) -> SplitRecord:
        return self.record.splits[name]

    def check_sizes(self) -> None:
        """Every listed file present with its recorded size (what a cache hit checks)."""
        for name, want in self.files.items():
            p = self.dir / name
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                raise DataError(f"prepared data {self.dir}: file {p} is missing; {force_hint(self.fingerprint)}") from None
            if size != want.bytes:
                what = "truncated" if size < want.bytes else "longer than recorded"
                raise DataError(
                    f"prepared data {self.dir}: file {p} is {what} ({size} bytes, manifest says {want.bytes}); "
                    f"{force_hint(self.fingerprint)}"
                )

    def verify(self) -> None:
        """Sizes and full sha256 of every file; the error names the first bad one."""
        self.check_sizes()
        for name, want in self.files.items():
            p = self.dir / name
            if sha256_file(p) != want.sha256:
                raise DataError(
                    f"prepared data {self.dir}: checksum error in {p} (its sha256 differs from {self.path}); "
                    f"{force_hint(self.fingerprint)}"
                )

    def check_checksums(self) -> None:
        """Sizes and the fast checksum of every file (XXH3-128, or sha256 for entries written
        before it), before the data is used: a flipped bit keeps the size and often the token id
        in range, and would train on silently. The error names the first bad file."""
        self.check_sizes()
        for name, want in self.files.items():
            kind, ok = file_matches(self.dir / name, want)
            if not ok:
                raise DataError(
                    f"prepared data {self.dir}: checksum error in {self.dir / name} (its {kind} differs from "
                    f"{self.path}); {force_hint(self.fingerprint)}"
                )

    def mapped_split(self, name: str) -> tuple[dict[str, Any], SplitRecord]:
        """The split's arrays memory-mapped (read-only, zero-copy) by name, and its record; what
        they mean is its shape's (``clustertune.data.shapes.open_split``)."""
        try:
            spec = self.split(name)
        except KeyError:
            raise DataError(f"prepared data {self.dir} has no split {name!r}") from None
        return {k: _map_array(self.dir, v) for k, v in spec.arrays.items()}, spec

    def shape_of(self, spec: SplitRecord) -> str:
        """The shape its task prepares data into (the manifest records the task); for an entry
        that records none, the shape its arrays show."""
        traits = traits_of(self.record.task or "")
        if traits is not None and traits.data is not None:
            return traits.data
        return "chats" if "loss_mask" in spec.arrays else "labelled_text" if "labels" in spec.arrays else "packed_text"


def file_matches(path: Path, want: FileEntry) -> tuple[str, bool]:
    """Which checksum of a manifest entry is checked, and whether ``path`` matches it: the
    XXH3-128 where the entry has one (fast), else the sha256 (entries written before XXH3)."""
    if want.xxh3_128 is not None:
        return "XXH3-128", xxh3_file(path) == want.xxh3_128
    return "sha256", sha256_file(path) == want.sha256


def load_manifest(directory: Path) -> Manifest:
    """Parse ``directory/manifest.json``; DataError for a missing, corrupt or newer-format one."""
    path = Path(directory) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"prepared data {directory}: {path} is missing (an incomplete or foreign directory); "
                        f"{force_hint(Path(directory).name)}") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"prepared data {directory}: {path} is corrupt ({exc}); {force_hint(Path(directory).name)}") from exc
    fmt = data.get("format") if isinstance(data, dict) else None
    if not isinstance(fmt, int):
        raise DataError(f"prepared data {directory}: {path} has no format version; {force_hint(Path(directory).name)}")
    if fmt > MANIFEST_FORMAT:
        raise DataError(
            f"prepared data {directory}: {path} has format {fmt}, newer than this clustertune reads "
            f"(up to {MANIFEST_FORMAT}); upgrade clustertune, or prepare again with this version "
            "(`clustertune prepare RECIPE --force`)"
        )
    try:
        record = ManifestRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        problem = "is missing" if err["type"] == "missing" else f"is not valid ({err['msg']})"
        raise DataError(f"prepared data {directory}: {path}: {where!r} {problem}; "
                        f"{force_hint(Path(directory).name)}") from None
    return Manifest(Path(directory), record)


def _map_array(root: Path, spec: ArraySpec) -> np.ndarray | ShardedArray:
    dtype = np.dtype(spec.dtype)
    tail = tuple(spec.shape[1:])
    parts = []
    for sh in spec.shards:
        if sh.rows == 0:
            continue
        try:
            parts.append(np.memmap(root / sh.file, dtype=dtype, mode="r", shape=(sh.rows, *tail)))
        except (OSError, ValueError) as exc:
            raise DataError(f"prepared data {root}: cannot map {root / sh.file}: {exc}; {force_hint(root.name)}") from exc
    if len(parts) == 1:
        return parts[0]
    return ShardedArray(parts, dtype, tail)


class ShardedArray:
    """Row-indexable view over several memory-mapped shards (the rows of all, in order)."""

    def __init__(self, parts: list[np.ndarray], dtype: np.dtype, tail: tuple[int, ...]):
        self.parts = parts
        self.dtype = dtype
        self.offsets = np.cumsum([0] + [len(p) for p in parts])
        self.shape = (int(self.offsets[-1]), *tail)
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def sum(self) -> int:
        return int(sum(int(p.sum()) for p in self.parts))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.concatenate([np.asarray(p) for p in self.parts]) if self.parts else np.empty(self.shape, self.dtype)
        return out.astype(dtype) if dtype is not None else out

    def __getitem__(self, idx: Any) -> np.ndarray:
        if isinstance(idx, (int, np.integer)):
            i = int(idx) + (len(self) if idx < 0 else 0)
            if not 0 <= i < len(self):
                raise IndexError(idx)
            p = int(np.searchsorted(self.offsets, i, side="right")) - 1
            return np.asarray(self.parts[p][i - self.offsets[p]])
        if isinstance(idx, slice):
            idx = np.arange(*idx.indices(len(self)))
        idx = np.asarray(idx, dtype=np.int64)
        idx = np.where(idx < 0, idx + len(self), idx)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError("index out of range")
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        out = np.empty((len(idx), *self.shape[1:]), dtype=self.dtype)
        for p in np.unique(which):
            sel = which == p
            out[sel] = self.parts[p][idx[sel] - self.offsets[p]]
        return out


@dataclass
class MappedArrays(Arrays):
    """:class:`Arrays` over memory-mapped shards; the token count comes from the manifest."""

    n_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.n_tokens
