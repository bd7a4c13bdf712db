"""What a person sees of a run whose ranks are other processes: their log lines, shown live on
the terminal the run was started from.

The ranks write their lines into files (rank 0's into the run's ``logs/run.log``, a user's
command's into ``logs/rank-R.log``); :class:`Tail` follows such files from a thread while the
launcher waits, and :class:`Echo` shows each line as the in-process run would have shown it:
a progress bar on a terminal, driven by the step lines, with every other line printed above
it; elsewhere (CI, a pipe, a file) the lines themselves.

The two formats a line is read back from are written here too, so the writer
(:mod:`clustertune.train.progress`, :mod:`clustertune.train.attempt`) and this reader cannot
drift apart: a log record's prefix (:data:`LOG_FORMAT`) and a step line (:func:`step_line`).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

LOG_FORMAT = "%(asctime)s {prefix}%(levelname)s %(message)s"
"""A launched rank's log records; ``{prefix}`` is ``rankR `` (with its space)."""

_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:rank\d+ )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
_EVAL = re.compile(r"^eval @ step (\d+): (\S+ \S+(?:  \S+ \S+)*)$")
_STEP = re.compile(r"^step (\d+)/(\d+)  (.*?)(?:  eta (\S+))?$")


GROUPS = " | "
"""Between a step line's groups of figures: the loss, the newest evaluation, the rest."""


def step_line(step: int, total: int, info: str, eta: str) -> str:
    """One log step's line: ``step 40/200  loss 3.12 | eval@0 perplexity 4,333 | lr 0.0003  eta 1:10``."""
    return f"step {step}/{total}  {info}  eta {eta}"


def parse_step_line(message: str) -> tuple[int, int, str] | None:
    """``(step, total, info)`` of a step line's message, None for any other line."""
    m = _STEP.match(message)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def fmt_metrics(values: dict[str, Any]) -> str:
    """``loss 3.12  lr 0.0003``: figures as the progress shows them (None left out)."""
    parts = []
    for k, v in values.items():
        if v is None:
            continue
        if isinstance(v, float):
            parts.append(f"{k} {v:.4g}" if abs(v) < 1e4 else f"{k} {v:,.0f}")
        else:
            parts.append(f"{k} {v}")
    return "  ".join(parts)


def eval_figures(step: int, results: dict[str, Any]) -> str:
    """``eval@STEP perplexity 251.3``: an evaluation's headline figures (the loss only where
    there is nothing else), labelled with the step it was taken at."""
    shown = {k.removeprefix("eval_"): v for k, v in results.items() if k != "eval_loss"} or \
        {"loss": results.get("eval_loss")}
    return f"eval@{step} " + fmt_metrics(shown)


def eval_line(step: int, results: dict[str, float]) -> str:
    """An evaluation's line: ``eval @ step 50: eval_loss 5.5023  eval_perplexity 245.1234``."""
    return f"eval @ step {step}: " + "  ".join(f"{k} {v:.4f}" for k, v in results.items())


def parse_eval_line(message: str) -> tuple[int, dict[str, float]] | None:
    """``(step, results)`` of an evaluation's line, None for any other line."""
    m = _EVAL.match(message)
    if m is None:
        return None
    try:
        return int(m.group(1)), {k: float(v) for k, v in (part.split(" ", 1) for part in m.group(2).split("  "))}
    except ValueError:
        return None


def message(line: str) -> str:
    """A log line without its record prefix (time, rank, level), as the terminal shows it."""
    return _RECORD.sub("", line, count=1)


_NODE_RECORD = re.compile(r"^((?:\[node \d+\] )?)\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:rank(\d+) )?"
                          r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def shown_record(line: str) -> str | None:
    """A line of a host's output during a recipe's run as the foreground shows it, the lines a
    local run shows: rank 0's records as their messages, another rank's only from WARNING up
    (its INFO lines repeat rank 0's), and any other line (a library's warning, a traceback) as
    it is."""
    m = _NODE_RECORD.match(line)
    if m is None:
        return line
    node, rank, level = m[1], m[2], m[3]
    if rank in (None, "0"):
        return node + line[m.end():]
    return f"{node}rank {rank}: {line[m.end():]}" if level not in ("DEBUG", "INFO") else None


def make_bar(total: int, completed: int, console: Any = None) -> tuple[Any, Any]:
    """A started rich progress bar (``train``, the count, elapsed time, ETA, then the figures)
    and its task. On a narrow terminal the figures are cut at its edge (the step count, elapsed
    time and ETA never are): a wrapped label would print under the bar and push it around."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, ProgressColumn
    from rich.progress import TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Column
    from rich.text import Text

    class Figures(ProgressColumn):
        # The only column the table may narrow; its text is cut there, never wrapped.
        def render(self, task: Any) -> Text:
            return Text(task.fields.get("info", ""), no_wrap=True, overflow="ellipsis")

    def whole() -> Column:
        return Column(no_wrap=True)

    bar = RichProgress(
        TextColumn("[bold]train", table_column=whole()), BarColumn(bar_width=24, table_column=whole()),
        MofNCompleteColumn(table_column=whole()), TimeElapsedColumn(table_column=whole()),
        TextColumn("eta", table_column=whole()), TimeRemainingColumn(table_column=whole()), Figures(),
        transient=False, console=console,
    )
    task = bar.add_task("train", total=total, completed=completed, info="")
    bar.start()
    return bar, task


class Echo:
    """Shows log lines as they come: on a terminal (``tty``) the step lines move a bar and every
    other line prints above it; elsewhere each line is written to ``out`` as it is.
    ``raw``: show lines as they are (a user's own output), with no prefix taken off.
    ``progress`` False (``--no-progress``): no bar, and no step or evaluation lines; the others
    (data, model, checkpoints, the end) as they come, as an in-process run shows them."""

    def __init__(self, tty: bool | None = None, out: TextIO | None = None, raw: bool = False, progress: bool = True):
        self.out = out if out is not None else sys.stderr
        self.tty = (self.out.isatty() if tty is None else tty) and progress
        self.raw = raw
        self.progress = progress
        self._bar: Any = None
        self._task: Any = None
        self._info = ""  # the figures the bar shows now

    def line(self, text: str) -> None:
        shown = text if self.raw else message(text)
        if not self.progress and not self.raw and (parse_step_line(shown) or parse_eval_line(shown)):
            return
        step = None if self.raw or not self.tty else parse_step_line(shown)
        evaluated = None if self.raw or not self.tty else parse_eval_line(shown)
        if step is not None:
            n, total, info = step
            if self._bar is None:
                from rich.console import Console

                self._bar, self._task = make_bar(total, n, Console(file=self.out))
            self._info = info
            self._bar.update(self._task, completed=n, total=total, info=info)
            return
        if evaluated is not None and self._bar is not None:
            # The bar shows an evaluation at once, as the in-process bar does (the last one has
            # no step line after it): in place of the one the latest step line carried.
            groups = [g for g in self._info.split(GROUPS) if g and not g.startswith("eval@")]
            groups.insert(1 if groups else 0, eval_figures(*evaluated))
            self._bar.update(self._task, info=GROUPS.join(groups))
        if self._bar is not None:
            self._bar.console.print(shown, markup=False, highlight=False)
        else:
            self.out.write(shown + "\n")
            self.out.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class Tail:
    """Follows files from a thread and hands each complete new line to ``show``, until
    :meth:`stop` (which reads what was written up to then, a last partial line included).

    ``files``: called each round, it names the files to follow now (a rank's log appears once
    that rank starts), each with the label its lines get (``""``: none)."""

    def __init__(self, files: Callable[[], Iterable[tuple[str, Path]]], show: Callable[[str], None],
                 poll: float = 0.2):
        self._files, self._show, self._poll = files, show, poll
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="clustertune-tail", daemon=True)

    def __enter__(self) -> Tail:
        # Whatever a file held before (an earlier attempt's lines) is not shown again.
        for _, path in self._files():
            self._offsets[path] = path.stat().st_size if path.is_file() else 0
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._done.is_set():
            self._done.set()
            self._thread.join()
            self._round(final=True)

    def _loop(self) -> None:
        while not self._done.wait(self._poll):
            self._round(final=False)

    def _round(self, final: bool) -> None:
        for label, path in self._files():
            offset = self._offsets.setdefault(path, 0)
            try:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except FileNotFoundError:
                continue
            self._offsets[path] = offset + len(data)
            *complete, rest = (self._partial.get(path, b"") + data).split(b"\n")
            if final and rest:
                complete, rest = [*complete, rest], b""
            self._partial[path] = rest
            for raw in complete:
                text = raw.decode("utf-8", "replace").rstrip("\r")
                try:
                    self._show(f"{label}{text}")
                except Exception:  # noqa: BLE001 - a broken terminal must not stop the run's wait
                    pass


def wait_showing(wait: Callable[[], int], files: Callable[[], Iterable[tuple[str, Path]]], echo: Echo) -> int:
    """``wait()`` for a process while its files' lines are shown through ``echo``; every line
    written before it returned is shown before this returns."""
    try:
        with Tail(files, echo.line):
            return wait()
    finally:
        echo.close()

