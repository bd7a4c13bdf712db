"""One decision, described or started: ``api.decide`` is what the CLI's dry run describes and
its run starts, and a start checks and submits one plan, made for the run directory it creates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clustertune import api
from clustertune.launch import backends
from clustertune.launch.inprocess import InProcessLauncher
from clustertune.launch.plan import LaunchPlan
from clustertune.runs import RunState
from tests.helpers import TINY_CAUSAL


def test_a_decision_is_described_without_a_trace_then_started_under_the_plan_its_backend_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "runs"
    seen: dict[str, Any] = {}

    class Watched(InProcessLauncher):  # the real in-process backend, its calls written down
        def check(self, recipe: Any, plan: LaunchPlan, resuming: Any = None) -> None:
            seen["checked"] = plan
            seen["dir made before the check"] = (root / plan.run_id).exists()
            super().check(recipe, plan, resuming)

        def submit(self, plan: LaunchPlan, run: Any, recipe: Any, *args: Any, **kwargs: Any) -> Any:
            seen["submitted"] = plan
            return super().submit(plan, run, recipe, *args, **kwargs)

    monkeypatch.setitem(backends._EXTRA, "inprocess", Watched)
    recipe = {**TINY_CAUSAL, "train": {**TINY_CAUSAL["train"], "max_steps": 2, "eval_at_start": False}}
    decided = api.decide(recipe, runs_root_dir=root)
    assert decided.backend == "inprocess" and decided.resuming is None

    text = api.describe(decided)
    assert "# launch plan" in text and str(root) in text
    assert not root.exists() or not any(root.iterdir()), "describing a decision made a run directory"

    run = api.start(decided, show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    assert seen["checked"] == seen["submitted"], "the backend checked one plan and was given another"
    assert seen["checked"].run_id == run.id and Path(seen["checked"].run_dir) == run.paths.root
    assert seen["dir made before the check"] is False  # a refusal by the backend leaves no run directory
