"""Raw examples from wherever the recipe says: builtin corpus, local files, save_to_disk
directories, or the Hugging Face Hub. Returns in-memory ``datasets.Dataset`` splits.

Local files are read with pandas/pyarrow into memory, so a bad recipe writes nothing to any
cache. Hub datasets go through ``datasets.load_dataset`` (its own cache, as usual).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clustertune.data import builtin
from clustertune.data.fingerprint import sha256_file
from clustertune.errors import DataError
from clustertune.recipe.schema import DataSection

TEXT_SUFFIXES = {".txt", ".text"}
JSON_SUFFIXES = {".json", ".jsonl"}
TABLE_SUFFIXES = TEXT_SUFFIXES | JSON_SUFFIXES | {".csv", ".parquet"}


@dataclass
class RawData:
    """Train and validation examples plus what identifies their source."""

    train: Any  # datasets.Dataset
    validation: Any  # datasets.Dataset
    identity: dict[str, Any] = field(default_factory=dict)
    carved: bool = False


def _looks_like_path(s: str) -> bool:
    return s.startswith(("/", "./", "../", "~")) or os.sep in s and Path(s).expanduser().exists() or Path(s).exists()


def _read_file(path: Path, key: str) -> Any:
    import pandas as pd
    from datasets import Dataset

    if not path.is_file():
        raise DataError(f"{key}: file {str(path)!r} does not exist (paths are relative to {os.getcwd()})")
    suffix = path.suffix.lower()
    try:
        if suffix in TEXT_SUFFIXES:
            lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            return Dataset.from_dict({"text": lines})
        if suffix == ".jsonl":
            import pyarrow as pa
            import pyarrow.json as pj

            try:  # Arrow's reader: several times faster than pandas on large files
                return Dataset(pj.read_json(path))
            except pa.ArrowInvalid:
                pass  # mixed types and other oddities: pandas copes
        if suffix in JSON_SUFFIXES:
            text = path.read_text(encoding="utf-8")
            lines = suffix == ".jsonl" or not text.lstrip().startswith("[")
            return Dataset.from_pandas(pd.read_json(path, lines=lines), preserve_index=False)
        if suffix == ".csv":
            return Dataset.from_pandas(pd.read_csv(path), preserve_index=False)
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return Dataset(pq.read_table(path))
    except (ValueError, TypeError, UnicodeDecodeError, OSError) as exc:  # Arrow's type errors are TypeErrors
        raise DataError(f"{key}: cannot read {str(path)!r} as {suffix[1:]}: {exc} (a column whose values "
                        "have different types in different rows?)") from exc
    raise DataError(
        f"{key}: {str(path)!r} has an unsupported extension {suffix or '(none)'}; "
        f"use one of {', '.join(sorted(TABLE_SUFFIXES))}"
    )


def _read_files(files: list[str], key: str) -> tuple[Any, list[dict[str, Any]]]:
    from datasets import concatenate_datasets

    parts, ident = [], []
    for f in files:
        p = Path(f).expanduser()
        ds = _read_file(p, key)
        parts.append(ds)
        st = p.stat()
        ident.append({"path": str(p.resolve()), "size": st.st_size, "sha256": sha256_file(p)})
    cols = {tuple(sorted(d.column_names)) for d in parts}
    if len(cols) > 1:
        raise DataError(f"{key}: the files have different columns: {sorted(cols)}")
    return (parts[0] if len(parts) == 1 else concatenate_datasets(parts)), ident


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


def carve_validation(ds: Any, fraction: float, seed: int) -> tuple[Any, Any]:
    """Hold out ``fraction`` of ``ds`` (at least one example) with a seeded permutation."""
    n = len(ds)
    if n < 2:
        raise DataError(f"data: only {n} training example(s); cannot carve a validation split from it")
    n_val = min(n - 1, max(1, int(round(n * fraction))))
    perm = np.random.default_rng(seed).permutation(n)
    return ds.select(np.sort(perm[n_val:])), ds.select(np.sort(perm[:n_val]))


def load_raw(d: DataSection, seed: int, check_text: bool = True) -> RawData:
    """Resolve the recipe's data section into train/validation examples (``check_text``: the
    text column must exist; SFT data checks its own columns)."""
    from datasets import Dataset, load_from_disk

    ident: dict[str, Any]
    val = None
    if d.train_files:
        train, files = _read_files(d.train_files, "data.train_files")
        ident = {"kind": "files", "train": files}
        if d.validation_files:
            val, vfiles = _read_files(d.validation_files, "data.validation_files")
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
            raise DataError(
                f"data.dataset: {name!r} looks like a path but does not exist; for local files use data.train_files"
            )
        else:
            train, val = _split(_load_hub(name, d.dataset_config, d.dataset_revision), d)
            ident = {"kind": "hub", "name": name, "config": d.dataset_config}
    carved = val is None
    if carved:
        train, val = carve_validation(train, d.validation_fraction, seed)
    for split_name, ds in (("train", train), ("validation", val)):
        if check_text and d.text_column not in ds.column_names:
            raise DataError(
                f"data.text_column: column {d.text_column!r} not in the {split_name} data; "
                f"its columns are {', '.join(ds.column_names)}"
            )
    return RawData(train=train, validation=val, identity=ident, carved=carved)


def load_validation(d: DataSection) -> Any:
    """Only the validation examples (``data.streaming``: the training text is never loaded whole)."""
    from datasets import load_from_disk

    name = d.dataset or ""
    if d.train_files:
        val, _ = _read_files(d.validation_files, "data.validation_files")
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
    if d.text_column not in val.column_names:
        raise DataError(
            f"data.text_column: column {d.text_column!r} not in the validation data; "
            f"its columns are {', '.join(val.column_names)}"
        )
    return val
