"""The progress display: the bar moves every step, shows the newest evaluation with its step,
and plain log lines (not a terminal) carry a real ETA."""

from __future__ import annotations

import io
import logging
import re

import pytest
from rich.console import Console

from clustertune.train.progress import Progress

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def final_bar(buf: io.StringIO) -> str:
    lines = [ANSI.sub("", ln).strip() for ln in buf.getvalue().replace("\r", "\n").splitlines()]
    return [ln for ln in lines if ln.startswith("train")][-1]


def terminal_progress(total: int, start: int = 0, width: int = 200) -> tuple[Progress, io.StringIO]:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width, color_system=None)
    return Progress(total, start, enabled=True, tty=True, console=console), buf


def test_the_bar_moves_every_step_between_log_steps() -> None:
    p, buf = terminal_progress(12, width=80)  # a narrow terminal: the figures wrap, the count stays whole
    p.started()
    p.update(4, {"loss": 6.25, "tok/s": 1234.0, "mfu": 0.5, "eval_perplexity": 1234.5678})
    for step in (5, 6, 7):  # no log step: the loss stays on the device, the bar still moves
        p.advance(step)
    p.close()
    bar = final_bar(buf)
    assert " 7/12 " in bar and "loss 6.25" in bar and "eta 0:00:0" in bar, bar


def test_the_bar_shows_the_newest_evaluation_at_once_with_its_step() -> None:
    p, buf = terminal_progress(100)
    p.started()
    p.evaluated(0, {"eval_loss": 8.0, "eval_perplexity": 2981.0})
    p.update(50, {"loss": 5.5})
    p.evaluated(50, {"eval_loss": 5.6, "eval_perplexity": 270.4})  # after the log step at 50
    p.close()
    bar = final_bar(buf)
    assert "eval@50 perplexity 270.4" in bar and "eval@0" not in bar, bar
    text = ANSI.sub("", buf.getvalue())
    assert "eval @ step 50: eval_loss 5.6000  eval_perplexity 270.4000" in text


def test_log_lines_without_a_terminal_have_the_newest_eval_and_an_eta(caplog: pytest.LogCaptureFixture) -> None:
    p = Progress(200, 100, enabled=True, tty=False)  # a resumed attempt: the ETA counts its own steps
    with caplog.at_level(logging.INFO, logger="clustertune"):
        p.started()
        p.evaluated(100, {"eval_loss": 4.0})
        p.update(110, {"loss": 3.9})
    line = caplog.messages[-1]
    assert re.fullmatch(r"step 110/200  loss 3\.9 \| eval@100 loss 4  eta \d+:\d\d", line), line
    assert "eval @ step 100: eval_loss 4.0000" in caplog.messages


def test_nothing_is_shown_by_other_ranks(caplog: pytest.LogCaptureFixture) -> None:
    p = Progress(10, 0, enabled=False, tty=False)
    with caplog.at_level(logging.DEBUG, logger="clustertune"):
        p.started()
        p.advance(1)
        p.evaluated(1, {"eval_loss": 1.0})
        p.update(1, {"loss": 1.0})
    assert caplog.messages == []
