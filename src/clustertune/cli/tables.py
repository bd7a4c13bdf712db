"""Tables for people: the key column (a run id, a fingerprint) is never cut; when the terminal
is too narrow, whole columns are left out instead, the least useful first."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

# Width when the output goes to a pipe or a file and $COLUMNS does not say.
PIPE_WIDTH = 200


def console() -> Console:
    """The terminal's width; ``$COLUMNS`` or 200 columns when the output is not a terminal."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return Console(soft_wrap=True)
    return Console(soft_wrap=True, width=PIPE_WIDTH)


def fitting_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int,
                    drop_first: Sequence[str]) -> list[int]:
    """Indexes of the columns to show in ``width`` characters: every column, or without those
    named in ``drop_first`` (dropped in that order) until the rest fits. The first column stays."""
    need = [max([len(h), *(len(r[i]) for r in rows)]) + 2 for i, h in enumerate(headers)]  # one space each side
    shown = list(range(len(headers)))
    for name in drop_first:
        if sum(need[i] for i in shown) <= width:
            break
        if name in headers and headers.index(name) != 0:
            shown.remove(headers.index(name))
    return shown


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], drop_first: Sequence[str] = ()) -> None:
    """Print rows under headers; the first column is the key and is printed whole, on one line
    when it fits the terminal at all (else wrapped, never shortened)."""
    out = console()
    shown = fitting_columns(headers, rows, out.width, drop_first)
    table = Table(box=None)
    for i in shown:
        table.add_column(headers[i], no_wrap=i != 0, overflow="fold" if i == 0 else "ellipsis",
                         min_width=max([len(headers[i]), *(len(r[i]) for r in rows)]) if i == 0 else None)
    for r in rows:
        table.add_row(*(r[i] for i in shown))
    out.print(table)
