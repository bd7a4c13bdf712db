"""One decision, described or started: ``api.decide`` is what the CLI's dry run describes and
its run starts, and a start checks and submits one plan, made for the run directory it creates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clustertune import api
from clustertune.errors import UserError
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


def test_a_start_works_out_nothing_again_and_writes_the_recipe_the_nodes_read_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a dry run printed is what starts: the run id, the plan and the files' placement come
    from the decision, and the run's recipe.yaml is written once, naming what the nodes read."""
    from clustertune.launch import decision as decision_module, files
    from clustertune.runs.paths import RunPaths

    root = tmp_path / "runs"
    (tmp_path / "setup.sh").write_text("export FROM_SETUP=1\n")
    recipe = {**TINY_CAUSAL, "train": {**TINY_CAUSAL["train"], "max_steps": 2, "eval_at_start": False},
              "launch": {"files": [str(tmp_path / "setup.sh")]}}
    decided = api.decide(recipe, runs_root_dir=root)
    assert decided.run_id in api.describe(decided) and decided.plan.run_id == decided.run_id
    assert [p.key for p in decided.placed] == ["launch.files.0"]

    def worked_out_again(*_: Any, **__: Any) -> Any:
        raise AssertionError("the start worked out part of the decision again")

    for name in ("build_plan", "new_run_id", "decide_files", "plan_for"):
        monkeypatch.setattr(decision_module, name, worked_out_again)
    monkeypatch.setattr(files, "decide", worked_out_again)
    writes: list[Path] = []
    real_write = Path.write_text

    def counted(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "recipe.yaml" and self.parent.parent == root:
            writes.append(self)
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", counted)
    run = api.start(decided, show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    assert run.id == decided.run_id and run.paths == RunPaths(decided.run_dir)
    assert writes == [run.paths.recipe], writes
    assert [f["key"] for f in run.info.files] == ["launch.files.0"]
    assert (run.paths.files / "setup.sh").read_text() == "export FROM_SETUP=1\n"


def test_a_dry_runs_decision_is_refused_at_the_start(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    dry = api.decide({**TINY_CAUSAL, "train": {**TINY_CAUSAL["train"], "max_steps": 2}}, runs_root_dir=root, dry=True)
    assert "# launch plan" in api.describe(dry)
    with pytest.raises(UserError, match="dry run"):
        api.start(dry, show_progress=False)
    assert not root.exists() or not any(root.iterdir())
