"""Raw examples from wherever the recipe says: builtin corpus, local files, save_to_disk
directories, or the Hugging Face Hub. Returns in-memory ``datasets.Dataset`` splits.

Local files are read with pandas/pyarrow into memory, so a bad recipe writes nothing to any
cache. Hub datasets go through ``datasets.load_dataset`` (its own cache, as usual).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from clustertune.data import builtin
from clustertune.data.origins import Origins, Part
from clustertune.data.text_column import TextColumn
from clustertune.data.source_checks import (JSON_SUFFIXES, TABLE_SUFFIXES, TEXT_SUFFIXES, bom_encoding, check_text_column,
                                            dataset_path_error, jsonl_problems, no_examples, not_a_file, not_utf8,
                                            text_lines, text_type_problem, unreadable, wrong_text_type)
from clustertune.errors import DataError
from clustertune.fsutil import sha256_file
from clustertune.recipe.data_schema import DataSection

T = TypeVar("T")


@dataclass
class RawData:
    """Train and validation examples plus what identifies their source."""

    train: Any  # datasets.Dataset
    validation: Any  # datasets.Dataset
    identity: dict[str, Any] = field(default_factory=dict)
    carved: bool = False
    origins: dict[str, Origins] = field(default_factory=dict)
    """Where each example of a split was read (its file and line), for messages about it."""


def _looks_like_path(s: str) -> bool:
    return s.startswith(("/", "./", "../", "~")) or os.sep in s and Path(s).expanduser().exists() or Path(s).exists()


def _read_file(path: Path, key: str, keep_linebreaks: bool = True, fingerprint: str | None = None) -> Any:
    """One local file as a ``datasets.Dataset``; ``fingerprint`` (its content's digest) spares
    datasets hashing the table read from JSON lines or parquet."""
    import pandas as pd
    from datasets import Dataset

    if not path.is_file():
        raise DataError(not_a_file(path, key))
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES | JSON_SUFFIXES | {".csv"} and bom_encoding(path):
        raise not_utf8(path, key)
    try:
        if suffix in TEXT_SUFFIXES:
            return Dataset.from_dict({"text": text_lines(path.read_text(encoding="utf-8"), keep_linebreaks)})
        if suffix == ".jsonl":
            import pyarrow as pa
            import pyarrow.json as pj

            try:  # Arrow's reader: several times faster than pandas on large files
                table = pj.read_json(path)
            except pa.ArrowInvalid:
                table = None  # mixed types and other oddities: pandas copes, once every line is an object
                if (problem := jsonl_problems(path, key)) is not None:
                    raise problem from None
            if table is not None:
                try:
                    table.validate(full=True)  # Arrow reads bytes that are not UTF-8 into its strings
                except pa.ArrowInvalid as exc:
                    raise not_utf8(path, key) from exc
                return Dataset(table, fingerprint=fingerprint)
        if suffix in JSON_SUFFIXES:
            text = path.read_text(encoding="utf-8")
            lines = suffix == ".jsonl" or not text.lstrip().startswith("[")
            return Dataset.from_pandas(pd.read_json(path, lines=lines), preserve_index=False)
        if suffix == ".csv":
            return Dataset.from_pandas(pd.read_csv(path), preserve_index=False)
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return Dataset(pq.read_table(path), fingerprint=fingerprint)
    except UnicodeDecodeError as exc:
        raise not_utf8(path, key) from exc
    except (ValueError, TypeError, OSError) as exc:  # Arrow's type errors are TypeErrors
        raise unreadable(path, key, exc) from exc
    raise DataError(
        f"{key}: {str(path)!r} has an unsupported extension {suffix or '(none)'}; "
        f"use one of {', '.join(sorted(TABLE_SUFFIXES))}"
    )


# Suffixes whose texts can be read a chunk at a time (a causal-LM prepare then never holds the corpus).
CHUNKED_SUFFIXES = TEXT_SUFFIXES | {".jsonl", ".parquet"}


class ArrowGaveUp(Exception):
    """Arrow's streaming JSON reader failed on a file pandas may still read (mixed types...):
    read the split again with ``arrow=False``."""


def as_text(t: Any) -> str:
    """A text column's value as the text to tokenize: None is empty, other values their ``str``."""
    return t if isinstance(t, str) else "" if t is None else str(t)


def text_chunks_of_files(files: list[str], text_column: str, key: str, chunk_bytes: int = 32 << 20,
                         arrow: bool = True, keep_linebreaks: bool = True) -> Iterator[Sequence[str]]:
    """The texts of local .txt/.jsonl/.parquet files in order, about ``chunk_bytes`` at a time:
    the rows :func:`load_raw` reads (the lines of text files as ``data.keep_linebreaks`` says; a JSON line or parquet row
    each, the text column's value through :func:`as_text`; what Arrow read stays a
    :class:`~clustertune.data.text_column.TextColumn`, nulls read as empty texts). Raises :class:`ArrowGaveUp` where
    Arrow cannot read a JSON lines file (``arrow=False`` reads it line by line instead)."""
    for f in files:
        p = Path(f).expanduser()
        if not p.is_file():
            raise DataError(not_a_file(p, key))
        suffix = p.suffix.lower()
        rows = 0
        try:
            if suffix in TEXT_SUFFIXES:
                chunks = _text_file_chunks(p, chunk_bytes, keep_linebreaks)
            elif suffix == ".jsonl":
                chunks = (_jsonl_chunks_arrow if arrow else _jsonl_chunks_python)(p, text_column, key, chunk_bytes)
            else:
                chunks = _parquet_chunks(p, text_column, key, chunk_bytes)
            for chunk in chunks:
                rows += len(chunk)
                yield chunk
        except UnicodeDecodeError as exc:
            raise not_utf8(p, key) from exc
        except OSError as exc:
            raise unreadable(p, key, exc) from exc
        if not rows:
            raise no_examples(p, key)


class ReadAhead(Iterator[T]):
    """The items of ``items``, each read by a thread of its own while the one before is used:
    the first as soon as this is made (while the caller gets ready for it), then the next each
    time one is taken. Reading a chunk (Arrow parsing JSON, pandas, the disk) releases the GIL,
    so it overlaps the encoding of the chunk before. What reading raises is raised where the
    item would have been taken. ``close()`` (or the end of a ``with`` block) waits for the read
    under way, at most one item."""

    _END = object()

    def __init__(self, items: Iterator[T]):
        from concurrent.futures import ThreadPoolExecutor

        self._items = items
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="clustertune-read")
        self._ahead = self._pool.submit(next, items, self._END)

    def __next__(self) -> T:
        item = self._ahead.result()
        if item is self._END:
            self.close()
            raise StopIteration
        self._ahead = self._pool.submit(next, self._items, self._END)
        return item

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_column(key: str, p: Path, column: str, names: list[str]) -> DataError:
    return DataError(f"data.text_column: column {column!r} not in {str(p)!r} ({key}); its columns are "
                     f"{', '.join(names) or '(none)'}")


def _text_file_chunks(p: Path, chunk_bytes: int, keep_linebreaks: bool) -> Iterator[list[str]]:
    # Universal newlines, as read_text(); then every other line break, as :func:`text_lines` cuts.
    with p.open(encoding="utf-8") as fh:
        while lines := fh.readlines(chunk_bytes):
            yield [part for line in lines for part in text_lines(line, keep_linebreaks)]


def _jsonl_chunks_arrow(p: Path, column: str, key: str, chunk_bytes: int) -> Iterator[TextColumn]:
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        # A block must hold whole lines (a longer line fails, and the file is read line by line).
        reader = pj.open_json(p, read_options=pj.ReadOptions(block_size=max(chunk_bytes, 1 << 20)))
        if column not in reader.schema.names:
            raise _no_column(key, p, column, reader.schema.names)
        problem = text_type_problem(reader.schema.field(column).type)
        if problem:
            raise wrong_text_type(column, f"{str(p)!r} ({key})", problem, reader.schema.names)
        for batch in reader:
            yield TextColumn(batch.column(column))
    except pa.ArrowInvalid as exc:
        raise ArrowGaveUp(str(exc)) from exc


def _jsonl_chunks_python(p: Path, column: str, key: str, chunk_bytes: int) -> Iterator[list[str]]:
    import json

    seen = False
    kinds: set[str] = set()  # the types of the column's values other than None
    names: dict[str, None] = {}  # the columns met, in order (for the error naming them)
    rows = 0
    with p.open(encoding="utf-8") as fh:
        start = 1
        while lines := fh.readlines(chunk_bytes):
            chunk = []
            for i, line in enumerate(lines, start):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise DataError(f"{key}: {str(p)!r} line {i} is not JSON: {exc}") from exc
                row = row if isinstance(row, dict) else {}
                rows += 1
                seen = seen or column in row
                if not seen and len(names) < 50:
                    names.update(dict.fromkeys(row))
                if row.get(column) is not None:
                    kinds.add(type(row[column]).__name__)
                chunk.append(as_text(row.get(column)))
            start += len(lines)
            yield chunk
    if not rows:  # blank lines only, or nothing: the caller names the file as holding no example
        return
    if not seen:
        raise _no_column(key, p, column, list(names))
    if "str" not in kinds:  # some values of other types among texts are read as their str
        problem = (f"holds {' and '.join(sorted(kinds))} values, not text" if kinds
                   else "holds no text: every value is null")
        raise wrong_text_type(column, f"{str(p)!r} ({key})", problem, [])


def _parquet_chunks(p: Path, column: str, key: str, chunk_bytes: int) -> Iterator[TextColumn]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{key}: cannot read {str(p)!r} as parquet: {exc}") from exc
    if column not in pf.schema_arrow.names:
        raise _no_column(key, p, column, pf.schema_arrow.names)
    problem = text_type_problem(pf.schema_arrow.field(column).type)
    if problem:
        raise wrong_text_type(column, f"{str(p)!r} ({key})", problem, pf.schema_arrow.names)
    meta = pf.metadata
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    rows = max(1, meta.num_rows * chunk_bytes // max(1, size))  # rows of about chunk_bytes
    for batch in pf.iter_batches(batch_size=rows, columns=[column]):
        yield TextColumn(batch.column(0))


def _read_files(files: list[str], key: str, keep_linebreaks: bool = True
                ) -> tuple[Any, list[dict[str, Any]], Origins]:
    from datasets import concatenate_datasets

    parts, ident, where = [], [], []
    for f in files:
        p = Path(f).expanduser()
        digest = sha256_file(p) if p.is_file() else None
        ds = _read_file(p, key, keep_linebreaks, digest)
        if len(ds) == 0:
            raise no_examples(p, key)
        parts.append(ds)
        where.append(Part(f, len(ds), f, keep_linebreaks))
        st = p.stat()
        ident.append({"path": str(p.resolve()), "size": st.st_size, "sha256": digest})
    cols = {tuple(sorted(d.column_names)) for d in parts}
    if len(cols) > 1:
        each = "; ".join(f"{f}: {', '.join(sorted(d.column_names))}" for f, d in zip(files, parts))
        raise DataError(f"{key}: the files have different columns ({each}); give files with the same columns")
    return (parts[0] if len(parts) == 1 else concatenate_datasets(parts)), ident, Origins(where, key=key)


def _load_hub(name: str, config: str | None, revision: str | None = None) -> Any:
    import datasets

    try:
        return datasets.load_dataset(name, config, revision=revision)
    except Exception as exc:  # datasets raises many types for "not reachable/not cached"
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
        why = "HF_HUB_OFFLINE=1 is set" if offline else "the hub could not be reached or has no such dataset"
        raise DataError(
            f"data.dataset: cannot load {name!r}{f' ({config})' if config else ''} from the Hugging Face Hub: "
            f"{why} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). On a machine with "
            "internet run `datasets.load_dataset(...).save_to_disk(DIR)` and set data.dataset=DIR, or point "
            "data.train_files at local files"
        ) from exc


def _split(ds_or_dict: Any, d: DataSection) -> tuple[Any, Any | None]:
    from datasets import DatasetDict

    if not isinstance(ds_or_dict, DatasetDict):
        return ds_or_dict, None
    if d.train_split not in ds_or_dict:
        raise DataError(
            f"data.train_split: split {d.train_split!r} not found; the dataset has {', '.join(ds_or_dict)}"
        )
    val = ds_or_dict[d.validation_split] if d.validation_split in ds_or_dict else None
    return ds_or_dict[d.train_split], val


def carve_indices(n: int, fraction: float, seed: int, first: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The rows kept for training and those held out by :func:`carve_validation`."""
    if n < 2:
        raise DataError(f"data: only {n} training example(s); cannot carve a validation split from it. Give more "
                        "examples, or a held-out file as data.validation_files=FILE (a JSON lines file is one "
                        "example per line: is the whole file on one line?)")
    n_val = min(n - 1, max(1, int(round(n * fraction))))
    perm = np.arange(n) if first else np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def carve_validation(ds: Any, fraction: float, seed: int, first: bool = False) -> tuple[Any, Any]:
    """Hold out ``fraction`` of ``ds`` (at least one example): the ``first`` ones (run_clm.py's
    ``train[:N%]``), else a seeded permutation's."""
    keep, held = carve_indices(len(ds), fraction, seed, first)
    return ds.select(keep), ds.select(held)


def load_raw(d: DataSection, seed: int, check_text: bool = True) -> RawData:
    """Resolve the recipe's data section into train/validation examples (``check_text``: the
    text column must exist; SFT data checks its own columns)."""
    from datasets import Dataset, load_from_disk

    ident: dict[str, Any]
    val = None
    origins: dict[str, Origins] = {}
    if d.train_files:
        train, files, origins["train"] = _read_files(d.train_files, "data.train_files", d.keep_linebreaks)
        ident = {"kind": "files", "train": files}
        if d.validation_files:
            val, vfiles, origins["validation"] = _read_files(d.validation_files, "data.validation_files",
                                                             d.keep_linebreaks)
            ident["validation"] = vfiles
    else:
        name = d.dataset or ""
        if name.startswith(builtin.BUILTIN_PREFIX):
            short = builtin.short_name(name)
            train = Dataset.from_list(builtin.builtin_rows(short))
            ident = {"kind": "builtin", "name": short, "version": builtin.corpus_version()}
        elif Path(name).expanduser().is_dir():
            p = Path(name).expanduser()
            try:
                loaded = load_from_disk(str(p))
            except (FileNotFoundError, ValueError) as exc:
                raise DataError(f"data.dataset: {name!r} is a directory but not one written by save_to_disk: {exc}") from exc
            train, val = _split(loaded, d)
            ident = {"kind": "disk", "path": str(p.resolve()), "fingerprint": getattr(train, "_fingerprint", None)}
        elif _looks_like_path(name) or name.endswith(tuple(TABLE_SUFFIXES)):
            raise dataset_path_error(name)
        else:
            train, val = _split(_load_hub(name, d.dataset_config, d.dataset_revision), d)
            ident = {"kind": "hub", "name": name, "config": d.dataset_config}
    if "train" not in origins:
        origins["train"] = Origins.of_dataset(f"data.dataset {name!r} {d.train_split!r}", len(train))
        if val is not None:
            origins["validation"] = Origins.of_dataset(f"data.dataset {name!r} {d.validation_split!r}", len(val))
    carved = val is None
    if carved:
        # data.split_seed, not the training seed: changing train.seed keeps the validation set.
        keep, held = carve_indices(len(train), d.validation_fraction, d.split_seed, d.validation_carve == "first")
        whole = origins["train"]
        train, val = train.select(keep), train.select(held)
        origins = {"train": whole.select(keep), "validation": whole.select(held)}
    for split_name, ds in (("train", train), ("validation", val)):
        if check_text:
            check_text_column(ds, d.text_column, f"{split_name} data")
    return RawData(train=train, validation=val, identity=ident, carved=carved, origins=origins)


def load_validation(d: DataSection) -> Any:
    """Only the validation examples (``data.streaming``: the training text is never loaded whole)."""
    from datasets import load_from_disk

    name = d.dataset or ""
    if d.train_files:
        val, _, _ = _read_files(d.validation_files, "data.validation_files", d.keep_linebreaks)
    elif Path(name).expanduser().is_dir():
        loaded = load_from_disk(str(Path(name).expanduser()))
        _, val = _split(loaded, d)
    else:
        import datasets

        try:
            val = datasets.load_dataset(name, d.dataset_config, split=d.validation_split, revision=d.dataset_revision)
        except ValueError as exc:  # unknown split
            raise DataError(f"data.validation_split: {exc}") from exc
        except Exception as exc:
            _load_hub(name, d.dataset_config, d.dataset_revision)  # raises the usual message
            raise DataError(f"data.dataset: cannot load the {d.validation_split!r} split of {name!r}: {exc}") from exc
    if val is None:
        raise DataError(
            f"data.streaming: the dataset has no {d.validation_split!r} split to evaluate on; set "
            "data.validation_split to one it has (a streamed corpus cannot carve one)"
        )
    check_text_column(val, d.text_column, "validation data")
    return val
