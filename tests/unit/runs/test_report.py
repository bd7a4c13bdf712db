"""`clustertune runs` and `runs --json`: the steps column is the last step the run reached, not
the last train row (rows come every train.log_every steps; TRL writes none for a short run)."""

from __future__ import annotations

import json
from pathlib import Path

from clustertune.runs import Run, RunState, report
from clustertune.runs.paths import CHECKPOINT_INDEX


def make(root: Path, task: str = "causal_lm") -> Run:
    run = Run.create(root, "r", task, "name: r\n", ["clustertune", "run", "r"])
    run.start_attempt()
    return run


def rows(run: Run, *rows: dict) -> None:
    run.paths.metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))


def checkpoint(run: Run, step: int, complete: bool = True) -> None:
    run.paths.checkpoint(step).mkdir(parents=True)
    if complete:
        (run.paths.checkpoint(step) / CHECKPOINT_INDEX).write_text("{}")


def test_a_run_stopped_between_log_steps_shows_the_step_it_stopped_at(tmp_path: Path) -> None:
    run = make(tmp_path)
    assert report.run_row(run)["steps"] == "0"
    rows(run, {"kind": "eval", "step": 0, "eval_loss": 6.0}, {"kind": "train", "step": 10, "loss": 4.0})
    assert report.run_row(run)["steps"] == "10"
    checkpoint(run, 13)  # a stop request saves the step it stopped at
    checkpoint(run, 14, complete=False)  # half written: not a step the run kept
    run.transition(RunState.CANCELLED, reason="stopped")
    assert report.run_row(run)["steps"] == "13"
    assert report.run_record(run)["steps"] == 13


def test_a_short_rl_run_without_train_rows_shows_its_steps(tmp_path: Path) -> None:
    run = make(tmp_path, "rlhf")
    rows(run, {"kind": "eval", "step": 0, "eval_reward": 0.1})  # TRL logged no train row in 2 steps
    run.paths.summary.write_text(json.dumps({"algorithm": "grpo", "steps": 2}))
    run.transition(RunState.COMPLETED)
    assert report.run_row(run)["steps"] == "2"
    assert report.run_record(run)["steps"] == 2

