"""Progress: a rich bar on a terminal, plain periodic log lines elsewhere (CI, SLURM logs).

The bar moves every optimizer step (``advance``: host-side only, no device sync), so its
elapsed time and ETA are measured from real steps; the training figures change at log steps
(``update``: the loss is read from the device there) and the newest evaluation is shown from
the moment it is done (``evaluated``), labelled with its step.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from clustertune.runs.echo import GROUPS, eval_figures, eval_line, fmt_metrics, make_bar, step_line

__all__ = ["Progress", "eval_figures", "fmt_metrics", "fmt_seconds"]

log = logging.getLogger("clustertune")


def fmt_seconds(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):  # nan: nothing measured yet
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """``advance()`` every step, ``update()`` at log intervals, ``evaluated()`` after each
    evaluation; the bar (tty) or a log line (not a tty) shows the figures.

    ``enabled``: this process reports at all (the main process). ``show``: on the terminal too;
    without it the lines still go to the run's log file (DEBUG level), so `clustertune logs`
    always has them. ``console``: the rich console the bar draws on (stderr by default).
    """

    def __init__(self, total: int, start: int, enabled: bool, tty: bool | None = None, show: bool = True,
                 console: Any = None):
        self.total, self.enabled = total, enabled
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._level = logging.INFO if show else logging.DEBUG
        if not show:
            self.tty = False
        self._bar: Any = None
        self._task: Any = None
        self._start = start
        self._t0: float | None = None  # when the first step of this attempt began
        self._figures: tuple[str, ...] = ()  # the latest log step's loss
        self._rest: tuple[str, ...] = ()  # and its other training figures
        self._eval = ""  # the newest evaluation's
        if enabled and self.tty:
            self._bar, self._task = make_bar(total, start, console)

    def started(self) -> None:
        """Training steps begin now (after any evaluation at the start): the ETA counts from here."""
        self._t0 = time.perf_counter()

    def advance(self, step: int) -> None:
        """Every optimizer step: the bar's count, elapsed time and ETA (host-side only)."""
        if self._bar is not None:
            self._bar.update(self._task, completed=step)

    def eta(self, step: int) -> float:
        """Seconds left at the pace of this attempt's steps so far (evaluations included)."""
        done = step - self._start
        if self._t0 is None or done <= 0:
            return float("nan")
        return (time.perf_counter() - self._t0) / done * (self.total - step)

    def _info(self) -> str:
        # The loss first, then the newest evaluation, then the rest: what a narrow terminal cuts
        # off is the least read.
        return GROUPS.join(p for p in (*self._figures, self._eval, *self._rest) if p)

    def update(self, step: int, values: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self._figures = (fmt_metrics({k: v for k, v in values.items() if k == "loss"}),)
        self._rest = (fmt_metrics({k: v for k, v in values.items() if k != "loss"}),)
        line = step_line(step, self.total, self._info(), fmt_seconds(self.eta(step)))
        if self._bar is not None:
            self._bar.update(self._task, completed=step, info=self._info())
            log.debug("%s", line)  # the run's log file has every step line, the bar or not
        else:
            log.log(self._level, "%s", line)

    def evaluated(self, step: int, results: dict[str, Any], line: str | None = None) -> None:
        """An evaluation is done: the bar shows it at once (not at the next log step), and a
        line records it (``line``, else every figure)."""
        if not self.enabled:
            return
        self._eval = eval_figures(step, results)
        if self._bar is not None:
            self._bar.update(self._task, info=self._info())
        self.note(line or eval_line(step, results))

    def note(self, message: str) -> None:
        if self.enabled:
            if self._bar is not None:
                self._bar.console.print(message)
                log.debug(message)
            else:
                log.log(self._level, message)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
