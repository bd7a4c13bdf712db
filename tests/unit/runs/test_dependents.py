"""Runs that other runs use: found in their resolved recipes, protected from `runs rm`, and a run
whose base was removed anyway says so instead of failing as if it were a hub name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clustertune.errors import ModelError, RunError
from clustertune.runs.dependents import removed_run_of, uses_of
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import list_runs
from tests.helpers import cli


def ended(root: Path, name: str, recipe: dict | None = None) -> Run:
    r = Run.create(root, name, "sft", yaml.safe_dump(recipe or {"name": name}), ["clustertune", "run", name])
    r.start_attempt()
    r.transition(RunState.COMPLETED)
    return r


@pytest.fixture
def family(tmp_path: Path) -> dict[str, Run]:
    root = tmp_path / "runs"
    base = ended(root, "quickstart")
    sft = ended(root, "sft", {"name": "sft", "model": {"name_or_path": str(base.paths.model), "tokenizer": None}})
    rl = ended(root, "rl", {"name": "rl", "rl": {"policy": str(base.paths.root / "merged_model"),
                                                 "rewards": [{"model": "org/reward"}]}})
    hub = ended(root, "hub", {"name": "hub", "model": {"name_or_path": "gpt2"}, "data": {"dataset": "builtin:pydoc"}})
    return {"base": base, "sft": sft, "rl": rl, "hub": hub, "root": root}  # type: ignore[dict-item]


def test_the_runs_that_name_a_run_s_files_are_its_users(family: dict) -> None:
    uses = uses_of(family["base"], list_runs(family["root"]))
    assert sorted((u.user.id, u.key) for u in uses) == sorted([(family["sft"].id, "model.name_or_path"),
                                                              (family["rl"].id, "rl.policy")])
    assert uses_of(family["hub"], list_runs(family["root"])) == []


def test_runs_rm_refuses_a_base_others_use_and_removes_it_with_them(family: dict) -> None:
    root, base, sft, rl = family["root"], family["base"], family["sft"], family["rl"]
    refused = cli("runs", "rm", base.id, "--runs-root", str(root))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{base.id} is used by run {sft.id} (model.name_or_path: {base.paths.model})" in refused.stderr
    assert f"is used by run {rl.id} (rl.policy:" in refused.stderr and "--force" in refused.stderr
    assert base.paths.root.is_dir()  # nothing removed
    together = cli("runs", "rm", base.id, sft.id, rl.id, "--runs-root", str(root))
    assert together.returncode == 0, together.stderr
    assert [r.id for r in list_runs(root)] == [family["hub"].id]


def test_force_removes_a_used_base_and_its_user_then_says_what_happened(family: dict) -> None:
    from clustertune.models.local import require_local
    from clustertune.recipe.load import load_recipe

    root, base, sft = family["root"], family["base"], family["sft"]
    assert cli("runs", "rm", base.id, "--force", "--runs-root", str(root)).returncode == 0
    assert not base.paths.root.exists()
    assert removed_run_of(str(base.paths.model)) == base.id
    with pytest.raises(ModelError, match=f"its base run {base.id} was removed"):
        require_local(str(base.paths.model), "model.name_or_path")
    # The same where a recipe's base is resolved (run, validate's config check, estimate-memory).
    from clustertune.models.build import resolve_config

    recipe = load_recipe({"name": "again", "task": "sft", "model": {"name_or_path": str(base.paths.model)},
                          "data": {"train_files": [str(root / "x.jsonl")]}})
    with pytest.raises(ModelError, match=f"model.name_or_path: {base.paths.model} does not exist: its base run "
                                         f"{base.id} was removed"):
        resolve_config(recipe, None)
    assert sft.paths.root.is_dir()


def test_a_missing_path_that_was_never_a_run_is_just_missing(tmp_path: Path, family: dict) -> None:
    from clustertune.models.local import require_local

    assert removed_run_of(str(family["sft"].paths.model)) is None  # the run is there; its model is not yet
    assert removed_run_of(str(tmp_path / "nowhere" / "model")) is None
    with pytest.raises(ModelError, match="directory .*nowhere.* does not exist") as err:
        require_local(str(tmp_path / "nowhere" / "model"), "model.name_or_path")
    assert "removed" not in str(err.value)
    require_local("gpt2", "model.name_or_path")  # a hub name is left to the hub


def test_a_run_that_has_not_ended_is_still_refused_first(family: dict) -> None:
    from clustertune import api

    live = Run.create(family["root"], "live", "sft", "name: live\n", ["x"])
    with pytest.raises(RunError, match="not ended"):
        list(api.remove_runs([live.id], runs_root_dir=family["root"]))
