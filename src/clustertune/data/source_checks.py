"""What is wrong with a data source, said so a user can fix it: a path that is not a file, text that
is not UTF-8 (or has a byte-order mark), JSON Lines rows of mixed shapes, a text column that is
missing or not text, a file with no examples. :mod:`clustertune.data.sources` reads; this names
what it cannot read."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from clustertune.errors import DataError

TEXT_SUFFIXES = {".txt", ".text"}
JSON_SUFFIXES = {".json", ".jsonl"}
TABLE_SUFFIXES = TEXT_SUFFIXES | JSON_SUFFIXES | {".csv", ".parquet"}


def dataset_path_error(name: str) -> DataError:
    """``data.dataset`` given as a path that is not a ``save_to_disk`` directory: a file (which
    belongs in ``data.train_files``) or nothing at all."""
    if Path(name).expanduser().is_file():
        return DataError(f"data.dataset: {name!r} is a file; data.dataset takes a hub name, builtin:NAME or a "
                         f"save_to_disk directory. Give files as data.train_files={name} "
                         "(and data.validation_files for a held-out set)")
    return DataError(f"data.dataset: {name!r} looks like a path but does not exist; for local files use data.train_files")


def not_a_file(path: Path, key: str) -> str:
    """Why ``path``, given as a data file, cannot be read as one."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return f"{key}: file {str(path)!r} does not exist (paths are relative to {os.getcwd()})"
    except OSError as exc:  # a symlink loop, a path through a file, no permission
        return f"{key}: {str(path)!r} cannot be opened ({exc.strerror}); give a regular file"
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe or a device)"
    return f"{key}: {str(path)!r} is {kind}; give a regular file (.txt, .json/.jsonl, .csv or .parquet)"


def text_lines(text: str, keep_linebreaks: bool) -> list[str]:
    """A .txt file's examples: every line with its line break (blank ones too), as run_clm.py
    reads them; without line breaks, the non-blank lines bare."""
    if keep_linebreaks:
        return text.splitlines(keepends=True)
    return [ln for ln in text.splitlines() if ln.strip()]


def _first_bad_utf8(path: Path) -> tuple[int, int] | None:
    """(line, byte in that line), both from 1, of the first bytes of ``path`` that are not UTF-8."""
    with path.open("rb") as fh:
        for i, line in enumerate(fh, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return i, exc.start + 1
    return None


# Byte-order marks of the encodings a text editor or a Windows tool writes, longest first.
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
         (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE"))


def bom_encoding(path: Path) -> str | None:
    """The encoding a file's byte-order mark names (UTF-16 or UTF-32), else None."""
    with path.open("rb") as fh:
        head = fh.read(4)
    return next((name for bom, name in _BOMS if head.startswith(bom)), None)


def not_utf8(path: Path, key: str) -> DataError:
    """The error for a data file that is not UTF-8 text: the encoding its byte-order mark names,
    else where the first bad bytes are."""
    found = bom_encoding(path)
    if found:
        return DataError(f"{key}: {str(path)!r} is {found} text (it starts with a {found[:6]} byte-order mark), "
                         f"not UTF-8; convert it with `iconv -f {found} -t UTF-8 OLD > NEW` and point the recipe "
                         "at the new file")
    where = _first_bad_utf8(path)
    at = f" (line {where[0]}, byte {where[1]} of that line)" if where else ""
    return DataError(f"{key}: {str(path)!r} is not UTF-8 text{at}; re-encode it as UTF-8 (e.g. "
                     "`iconv -f latin1 -t utf-8 OLD > NEW`) and point the recipe at the new file")


# What a file of each kind should look like, for a file that cannot be read as one.
_SHAPE = {
    ".jsonl": "one JSON object per line",
    ".json": "a JSON array of objects, or one object per line",
    ".csv": "a header row naming the columns, then one row per example",
    ".parquet": "is it a parquet file, and complete?",
}


def jsonl_problems(path: Path, key: str) -> DataError | None:
    """The lines of a JSON lines file that are not JSON objects, named by line (up to 5, with
    the count), or None when every line is one."""
    import json

    bad: list[str] = []
    total = 0
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                why = f"is not JSON ({exc})"
            else:
                if isinstance(row, dict):
                    continue
                why = f"is a JSON {_json_kind(row)}, not an object"
            total += 1
            if len(bad) < 5:
                bad.append(f"  line {i} {why}")
    if not total:
        return None
    return DataError(f"{key}: {str(path)!r}: {total} line(s) are not JSON objects"
                     f"{' (the first 5)' if total > 5 else ''}:\n" + "\n".join(bad) +
                     "\nfix: one JSON object per line, e.g. {\"messages\": [...]} or {\"text\": \"...\"}")


def _json_kind(v: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(v), "number")


def _kind_clash(value: Any, where: str, n: int, seen: dict[str, tuple[str, int]]) -> str | None:
    """Record the JSON kind of ``value`` (line ``n``) and of everything in it, by path (list
    items share one: ``messages[].content``), in ``seen``; the first path that held another kind
    before is described. Nulls take no kind: any field may hold them."""
    if value is None:
        return None
    kind = "text" if isinstance(value, str) else "object" if isinstance(value, dict) else _json_kind(value)
    first, line = seen.setdefault(where, (kind, n))
    if first != kind:
        other = "elsewhere on the same line" if line == n else f"on line {line}"
        return f"line {n}: {where} is {_a(kind)}, but {_a(first)} {other}"
    children = ([(v, where + "[]") for v in value] if isinstance(value, list)
                else [(v, f"{where}.{k}") for k, v in value.items()] if isinstance(value, dict) else [])
    for v, path in children:
        if (clash := _kind_clash(v, path, n, seen)) is not None:
            return clash
    return None


def _mixed_types(path: Path, column: str) -> str | None:
    """Where a JSON lines file's ``column`` holds values of different kinds (text in one row or
    turn, a list or a number in another), which Arrow cannot put in one column: the first line
    that differs, or None."""
    import json

    seen: dict[str, tuple[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                row = json.loads(line) if line.strip() else None
            except ValueError:
                return None
            if isinstance(row, dict) and (clash := _kind_clash(row.get(column), column, n, seen)) is not None:
                return clash
    return None


def _a(kind: str) -> str:
    return {"text": "text", "object": "an object", "array": "a list"}.get(kind, f"a {kind}")


def unreadable(path: Path, key: str, exc: Exception) -> DataError:
    suffix = path.suffix.lower()
    failed = re.search(r"Conversion failed for column (\S+)", str(exc))
    if failed and suffix in JSON_SUFFIXES and (where := _mixed_types(path, failed.group(1))):
        return DataError(f"{key}: cannot read {str(path)!r}: {where}; every row must give a field the same kind "
                         "of value (chat turns: \"content\" is text in every turn; turn a list of content parts "
                         "such as [{\"type\": \"text\", \"text\": ...}] into its text)")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = ("a column whose values have different types in different rows?" if isinstance(exc, TypeError)
            else _SHAPE[suffix] if suffix == ".parquet" else f"expected {_SHAPE[suffix]}" if suffix in _SHAPE else "")
    return DataError(f"{key}: cannot read {str(path)!r} as {suffix[1:]}: {first}" + (f" ({hint})" if hint else ""))


def no_examples(path: Path, key: str) -> DataError:
    what = "is empty" if path.stat().st_size == 0 else "holds no example (blank lines only?)"
    return DataError(f"{key}: {str(path)!r} {what}; give files that hold examples, or drop it from {key}")


def text_type_problem(t: Any) -> str | None:
    """Why a text column of Arrow type ``t`` holds no text to tokenize (None: it does)."""
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t):
        return None
    if pa.types.is_null(t):
        return "holds no text: every value is null"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return f"holds numbers ({t}), not text"
    if pa.types.is_boolean(t):
        return "holds true/false values, not text"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"holds lists ({t}), not text"
    return f"holds {t} values, not text"


def wrong_text_type(column: str, where: str, problem: str, names: list[str]) -> DataError:
    others = [n for n in names if n != column]
    return DataError(f"data.text_column: column {column!r} of {where} {problem}; set data.text_column to the "
                     "column that holds the text" + (f" (the others: {', '.join(others)})" if others else ""))


def check_text_column(ds: Any, column: str, where: str) -> None:
    """DataError unless ``ds`` (a datasets.Dataset) has ``column`` holding text."""
    if column not in ds.column_names:
        raise DataError(f"data.text_column: column {column!r} not in the {where}; "
                        f"its columns are {', '.join(ds.column_names)}")
    problem = text_type_problem(ds.data.schema.field(column).type)
    if problem:
        raise wrong_text_type(column, f"the {where}", problem, list(ds.column_names))
