"""Where each example came from: the file and its line (JSON lines, CSV, text), row (parquet) or
element (a JSON array), or the dataset's row, so that a problem found after the files were
concatenated, limited and carved into a validation split is named where the user can open it.
Every per-example problem of the data (SFT conversations, class labels, KTO's desirable flags)
names its example through :func:`row_at`, never by its index in a split.

An :class:`Origins` maps the index of an example in a split to the row it was read from; only
the few examples a message names are ever turned into lines (a file is scanned once then).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Part:
    """One source of rows: a local file, or a dataset (``path`` None, ``label`` says which)."""

    label: str
    rows: int
    path: str | None = None
    keep_linebreaks: bool = True


def _nonblank_lines(path: str) -> list[int]:
    """The numbers (from 1) of the lines of ``path`` that hold something: the rows that JSON
    lines readers and a .txt file without its line breaks keep."""
    out = []
    with open(path, "rb") as fh:
        for i, line in enumerate(fh, 1):
            if line.strip():
                out.append(i)
    return out


def _csv_record_lines(path: str) -> list[int]:
    """The line (from 1) where each example of a CSV file starts: the records after the header,
    blank lines skipped as pandas skips them, a quoted value over several lines counted whole."""
    import csv

    out: list[int] = []
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        end = 0  # the last line read so far
        for record in reader:
            start, end = end + 1, reader.line_num
            if record:
                out.append(start)
    return out[1:]  # the first record is the header


@dataclass
class Origins:
    """The origin of every example of one split (``index``: the row of the concatenated parts
    each example is; None while they are the same)."""

    parts: list[Part]
    index: np.ndarray | None = None
    key: str = "data"
    """The recipe key that names the source (``data.train_files``, ``data.dataset``)."""
    _lines: dict[str, list[int]] = field(default_factory=dict, repr=False)

    @classmethod
    def of_dataset(cls, label: str, rows: int) -> Origins:
        return cls([Part(label, rows)], key="data.dataset")

    def select(self, idx: np.ndarray) -> Origins:
        """The origins of ``ds.select(idx)``."""
        idx = np.asarray(idx, dtype=np.int64)
        return Origins(self.parts, idx if self.index is None else self.index[idx], self.key, self._lines)

    def where(self, i: int) -> str:
        """Example ``i`` of the split as the user finds it: ``'train.jsonl' line 13``."""
        row = int(self.index[i]) if self.index is not None else int(i)
        for part in self.parts:
            if row < part.rows:
                return self._in_part(part, row)
            row -= part.rows
        return f"example {i}"  # not reached: the parts hold every row

    def _in_part(self, part: Part, row: int) -> str:
        if part.path is None:
            return f"{part.label} row {row}"
        name = repr(part.path)
        suffix = Path(part.path).suffix.lower()
        if suffix == ".csv":
            lines = self._lines.get(part.path)
            if lines is None:
                lines = self._lines[part.path] = _csv_record_lines(part.path)
            return f"{name} line {lines[row]}" if row < len(lines) else f"{name} row {row + 1} after the header"
        if suffix == ".parquet":
            return f"{name} row index {row}"
        if suffix in (".txt", ".text") and part.keep_linebreaks:
            return f"{name} line {row + 1}"
        if suffix == ".json" and _is_array(part.path):
            return f"{name} element {row} of the array"
        lines = self._lines.get(part.path)
        if lines is None:
            lines = self._lines[part.path] = _nonblank_lines(part.path)
        return f"{name} line {lines[row]}" if row < len(lines) else f"{name} row {row + 1}"


def _is_array(path: str) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip()
    return head.startswith(b"[")


def row_at(origins: Origins | None, split: str, i: int) -> str:
    """Example ``i`` of ``split`` as the user finds it: where it was read with the split in
    brackets (``'train.jsonl' line 13 (validation)``), or the split's row where nothing says
    where it came from (rows a caller made itself)."""
    if origins is None:
        return f"{split} row {i}"
    return f"{origins.where(i)} ({split})"


SHOWN = 5
"""How many examples a message about many bad rows names (the count says how many there are)."""


class Found:
    """Problems with examples of one split, each named where it was read, gathered so that one
    error names the first few and how many there are in all."""

    def __init__(self, origins: Origins | None, split: str):
        self.origins, self.split = origins, split
        self.shown: list[str] = []
        self.total = 0

    def at(self, origins: Origins | None, split: str) -> Found:
        """From now on, the examples added are those of ``split`` (one error for both splits)."""
        self.origins, self.split = origins, split
        return self

    def where(self, i: int) -> str:
        return self.origins.where(i) if self.origins is not None else f"{self.split} example {i}"

    def add(self, i: int, problem: str) -> None:
        self.total += 1
        if len(self.shown) < SHOWN:
            self.shown.append(f"  {self.where(i)}: {problem}")

    def error_text(self, of: int, what: str, fix: str, split: str | None = None) -> str | None:
        """The message (None when nothing was found): ``key: N of M SPLIT examples WHAT``, the
        first few with where they are, then the fix."""
        if not self.total:
            return None
        key = self.origins.key if self.origins is not None else "data"
        first = f" (the first {SHOWN})" if self.total > SHOWN else ""
        return (f"{key}: {self.total} of {of} {split or self.split} examples {what}{first}:\n" + "\n".join(self.shown)
                + f"\nfix: {fix}")
