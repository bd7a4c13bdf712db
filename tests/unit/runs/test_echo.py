"""What the launching terminal shows of ranks that are other processes: their log lines without
the record prefix, a bar driven by the step lines on a terminal, lines followed as they are
written (a partial last line included once the process ends)."""

from __future__ import annotations

import io
import logging
import re
import time
from pathlib import Path

from clustertune.runs.echo import (LOG_FORMAT, Echo, Tail, eval_line, message, parse_eval_line, parse_step_line,
                                   step_line, wait_showing)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def record(text: str, rank: int = 0, level: int = logging.INFO) -> str:
    """A line as a launched rank's log handler writes it."""
    fmt = logging.Formatter(LOG_FORMAT.format(prefix=f"rank{rank} "))
    return fmt.format(logging.LogRecord("clustertune", level, __file__, 1, text, None, None))


def test_a_ranks_record_reads_back_as_its_message() -> None:
    line = step_line(40, 200, "loss 3.12 | eval@0 perplexity 4,333", "1:10")
    assert message(record(line)) == line
    assert message(record("eval @ step 4: eval_loss 5.1", level=logging.WARNING)) == "eval @ step 4: eval_loss 5.1"
    assert message("a line of a user's own that starts like nothing") == "a line of a user's own that starts like nothing"
    assert parse_step_line(line) == (40, 200, "loss 3.12 | eval@0 perplexity 4,333")
    assert parse_eval_line(eval_line(8, {"eval_loss": 5.25, "eval_accuracy": 0.5})) == (8, {"eval_loss": 5.25, "eval_accuracy": 0.5})
    assert parse_eval_line("eval @ step 8: something else entirely") is None
    assert parse_step_line("checkpoint step-00000004 written (0.1s)") is None


def test_without_a_terminal_every_line_is_shown_as_it_is() -> None:
    out = io.StringIO()
    echo = Echo(out=out)
    echo.line(record(step_line(4, 12, "loss 6.25", "0:03")))
    echo.line(record("checkpoint step-00000004 written (0.1s)"))
    echo.close()
    assert out.getvalue().splitlines() == ["step 4/12  loss 6.25  eta 0:03", "checkpoint step-00000004 written (0.1s)"]


def test_without_progress_the_phases_show_and_the_steps_and_evaluations_do_not() -> None:
    """`--no-progress`, on a terminal or not: no bar, no step or evaluation lines; every other line
    (what an in-process run shows then) as it comes."""
    for out in (io.StringIO(), Terminal()):
        echo = Echo(out=out, progress=False)
        echo.line(record("model: gpt2, 0.10M parameters"))
        echo.line(record(step_line(4, 12, "loss 6.25", "0:03")))
        echo.line(record(eval_line(4, {"eval_loss": 5.5})))
        echo.line(record("checkpoint step-00000004 written (0.1s)"))
        echo.line(record("done at step 12"))
        echo.close()
        assert out.getvalue().splitlines() == ["model: gpt2, 0.10M parameters", "checkpoint step-00000004 written (0.1s)",
                                               "done at step 12"], out.getvalue()


def test_on_a_terminal_the_step_lines_move_a_bar_and_other_lines_print_above_it() -> None:
    out = Terminal()
    echo = Echo(out=out)
    echo.line(record("model: gpt2, 0.10M parameters"))  # before the first step: printed as it is
    echo.line(record(step_line(4, 12, "loss 6.25 | eval@4 perplexity 512.3", "0:03")))
    echo.line(record("checkpoint step-00000004 written (0.1s)"))
    echo.line(record(step_line(12, 12, "loss 5.5 | eval@4 perplexity 512.3 | tok/s 1,234", "0:00")))
    # The last evaluation has no step line after it: its own line puts it on the bar.
    echo.line(record(eval_line(12, {"eval_loss": 5.5, "eval_perplexity": 245.1})))
    echo.close()
    screen = ANSI.sub("", out.getvalue()).replace("\r", "\n")
    assert "model: gpt2, 0.10M parameters" in screen and "checkpoint step-00000004 written" in screen
    bars = [ln.strip() for ln in screen.splitlines() if ln.strip().startswith("train")]
    # 80 columns (rich's width for a file): the loss and the eval label stay on the bar's line,
    # cut at the edge rather than wrapped onto a line of their own under it.
    assert " 12/12 " in bars[-1] and "loss 5.5 | eval@12 per" in bars[-1], screen
    assert not any(ln.lstrip().startswith(("eval@", "perplexity", "245")) for ln in screen.splitlines()), screen
    assert not any(ln.startswith("step ") for ln in screen.splitlines()), screen  # the bar, not the lines


def test_tail_shows_lines_as_they_are_written_and_the_rest_when_stopped(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("an earlier attempt's line\n")
    seen: list[tuple[float, str]] = []
    with Tail(lambda: [("", log), ("[rank 1] ", tmp_path / "rank-1.log")], lambda s: seen.append((time.monotonic(), s)),
              poll=0.05) as tail:
        with log.open("a") as fh:
            fh.write("first\n")
            fh.flush()
            deadline = time.monotonic() + 10
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
            assert [s for _, s in seen] == ["first"]  # shown while the writer is still going
            (tmp_path / "rank-1.log").write_text("from rank 1\n")  # a log that appears later
            fh.write("no newline yet")
        tail.stop()
    # Each file's lines in their order; the partial last line is shown once the writer is done.
    assert [s for _, s in seen][0] == "first"
    assert sorted(s for _, s in seen[1:]) == ["[rank 1] from rank 1", "no newline yet"]


def test_wait_showing_returns_the_exit_code_after_every_line(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    out = io.StringIO()

    def work() -> int:
        with log.open("a") as fh:
            for i in range(50):
                fh.write(f"line {i}\n")
        return 3

    assert wait_showing(work, lambda: [("", log)], Echo(out=out, raw=True)) == 3
    assert out.getvalue().splitlines() == [f"line {i}" for i in range(50)]


def test_a_hosts_lines_of_a_recipe_run_show_as_a_local_run_shows_them() -> None:
    from clustertune.runs.echo import shown_record

    lines = ["[node 0] 2026-12-01 21:51:19,241 rank0 INFO eval @ step 0: eval_loss 8.3680  eval_perplexity 4307.0760",
             "[node 1] 2026-12-01 21:51:30,623 rank1 INFO state held per rank after step 1 (MiB): rank 0: params 16.18",
             "[node 1] 2026-12-01 21:51:31,000 rank1 ERROR rank 1 cannot read its shard",
             "2026-12-01 21:53:15,456 rank0 INFO step 10/20  loss 7.926 | eval@0 perplexity 4307",
             "[node 1] Traceback (most recent call last):"]
    assert [shown_record(ln) for ln in lines] == [
        "[node 0] eval @ step 0: eval_loss 8.3680  eval_perplexity 4307.0760", None,
        "[node 1] rank 1: rank 1 cannot read its shard", "step 10/20  loss 7.926 | eval@0 perplexity 4307",
        "[node 1] Traceback (most recent call last):"]
