"""Progress: a rich bar on a terminal, plain periodic log lines elsewhere (CI, SLURM logs)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("clustertune")


def fmt_metrics(values: dict[str, Any]) -> str:
    parts = []
    for k, v in values.items():
        if v is None:
            continue
        if isinstance(v, float):
            parts.append(f"{k} {v:.4g}" if abs(v) < 1e4 else f"{k} {v:,.0f}")
        else:
            parts.append(f"{k} {v}")
    return "  ".join(parts)


class Progress:
    """``update()`` at log intervals; the bar (tty) or a log line (not a tty) shows the figures.

    ``enabled``: this process reports at all (the main process). ``show``: on the terminal too;
    without it the lines still go to the run's log file (DEBUG level), so `clustertune logs`
    always has them.
    """

    def __init__(self, total: int, start: int, enabled: bool, tty: bool | None = None, show: bool = True):
        self.total, self.enabled = total, enabled
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._level = logging.INFO if show else logging.DEBUG
        if not show:
            self.tty = False
        self._bar: Any = None
        self._task: Any = None
        self._t0 = time.perf_counter()
        self._start = start
        if enabled and self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress
            from rich.progress import TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._bar = RichProgress(
                TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                transient=False,
            )
            self._task = self._bar.add_task("train", total=total, completed=start, info="")
            self._bar.start()

    def update(self, step: int, values: dict[str, Any]) -> None:
        if not self.enabled:
            return
        text = fmt_metrics(values)
        if self._bar is not None:
            self._bar.update(self._task, completed=step, info=text)
            log.debug("step %d/%d  %s", step, self.total, text)
        else:
            done = step - self._start
            elapsed = time.perf_counter() - self._t0
            eta = elapsed / done * (self.total - step) if done > 0 else float("nan")
            log.log(self._level, "step %d/%d  %s  eta %.0fs", step, self.total, text, eta)

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
