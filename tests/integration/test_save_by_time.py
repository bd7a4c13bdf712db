"""``train.save_every_minutes``: a run without ``save_every`` still keeps checkpoints once that
much training time has passed, on log steps; null turns it off."""

from __future__ import annotations

from pathlib import Path

import clustertune as ct
from clustertune.runs.paths import checkpoint_step
from clustertune.runs.state import RunState
from tests.helpers import TINY_CAUSAL, with_


def _steps_saved(minutes: float | None) -> list[int]:
    recipe = with_(TINY_CAUSAL, train={"max_steps": 12, "log_every": 4, "keep_last": 5, "eval_at_start": False,
                                       "save_every_minutes": minutes})
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    return [checkpoint_step(p.name) for p in run.paths.complete_checkpoints()]


def test_checkpoints_come_by_time_on_log_steps_and_not_when_turned_off(runs_root: Path) -> None:
    assert _steps_saved(1e-6) == [4, 8]  # always due: every log step but the last (the final model)
    assert _steps_saved(None) == []
    assert ct.load_recipe(TINY_CAUSAL).train.save_every_minutes == 30  # the default keeps long runs safe
