"""A run that starts from another run's model (SFT's model.name_or_path, RL's rl.policy) names
that run's final model once decided; a shipped recipe's run not trained yet is trained first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clustertune.errors import RunError
from clustertune.launch import submit
from clustertune.recipe.load import load_recipe
from clustertune.runs import RunState, get_run
from clustertune.runs.run import Run
from tests.helpers import TINY_CAUSAL, TINY_CLS, with_


def completed(root: Path, name: str) -> Run:
    """A completed run whose final model is a tiny GPT-2 config (nothing here loads weights)."""
    from transformers import GPT2Config

    run = Run.create(root, name, "causal_lm", yaml.safe_dump(TINY_CAUSAL), ["test"])
    run.start_attempt()
    run.transition(RunState.COMPLETED)
    GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=128, vocab_size=512).save_pretrained(run.paths.model)
    return run


def test_a_missing_shipped_policy_run_is_trained_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "runs"
    trained: list[str] = []

    def start(decided: Any, **_: Any) -> Run:  # stands in for training it, once it is decided
        trained.append(decided.recipe.name)
        return completed(Path(decided.root), decided.recipe.name)

    monkeypatch.setattr(submit, "start_launch", start)
    recipe = load_recipe("rlhf-dpo-offline")
    assert recipe.rl is not None and recipe.rl.policy == "run:quickstart"
    with pytest.raises(RunError, match="no run 'quickstart'"):  # prepare and estimate-memory: not trained for them
        submit.resolve_base_model(recipe, root, train_missing=False)
    assert trained == []
    resolved = submit.resolve_base_model(recipe, root, show_progress=False)
    assert trained == ["quickstart"]
    assert resolved.rl.policy == str(get_run("quickstart", root).paths.model)  # the resolved recipe names it
    again = submit.resolve_base_model(recipe, root, show_progress=False)
    assert trained == ["quickstart"] and again.rl.policy == resolved.rl.policy  # there now: not trained again


# -- run:<id> as the model of every task that can start from one ---------------------------------


def _on_run(base: dict[str, Any], ref: str, runs: Path) -> dict[str, Any]:
    """``base`` (a tiny recipe) starting from ``ref`` instead of building its model fresh."""
    recipe = with_(base, tracking={"runs_root": str(runs)})
    recipe["model"] = {k: v for k, v in recipe["model"].items() if k not in ("config", "config_overrides")}
    recipe["model"]["name_or_path"] = ref
    return recipe


@pytest.mark.parametrize("base", [TINY_CAUSAL, TINY_CLS], ids=["causal_lm", "sequence_classification"])
def test_every_task_that_can_start_from_a_run_resolves_run_names_once_decided(
        base: dict[str, Any], tmp_path: Path) -> None:
    """``run:<id>`` (and a run's name) as the base of causal_lm and classification: the decided
    recipe names that run's final model, as for SFT, instead of a hub name nobody has."""
    from clustertune import api

    runs = tmp_path / "runs"
    made = completed(runs, "pretrained")
    for ref in (f"run:{made.id}", "run:pretrained"):
        decided = api.decide(_on_run(base, ref, runs), show_progress=False)
        assert decided.recipe.model.name_or_path == str(made.paths.model), ref
        assert decided.recipe.model.name_or_path == str(api.with_base(api.validate(
            _on_run(base, ref, runs)).recipe).model.name_or_path)  # prepare and estimate-memory read the same


def test_a_run_base_that_is_missing_or_unfinished_is_refused_at_validate_saying_what_to_do(tmp_path: Path) -> None:
    from clustertune import api
    from clustertune.errors import RecipeError

    runs = tmp_path / "runs"
    with pytest.raises(RecipeError, match=r"model.name_or_path: no run 'nosuch' under .*`clustertune runs` lists"):
        api.validate(_on_run(TINY_CAUSAL, "run:nosuch", runs))
    unfinished = Run.create(runs, "halfway", "causal_lm", yaml.safe_dump(TINY_CAUSAL), ["test"])
    unfinished.start_attempt()
    unfinished.transition(RunState.FAILED, reason="killed")
    with pytest.raises(RecipeError, match=rf"model.name_or_path: run {unfinished.id} is FAILED and has no final model "
                                          rf"yet .*`clustertune run --resume {unfinished.id}`"):
        api.validate(_on_run(TINY_CLS, f"run:{unfinished.id}", runs))
    with pytest.raises(RecipeError, match=rf"run {unfinished.id} has no complete checkpoint of step 4 \(its "
                                          r"checkpoints: none\)"):
        api.validate(_on_run(TINY_CAUSAL, f"run:{unfinished.id}@step-4", runs))


def test_a_task_that_cannot_start_from_a_run_refuses_a_run_name_at_validate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task (a plugin's, say) that does not declare ``base_model_from_run`` names itself and
    the key, rather than passing the name on to the hub."""
    import dataclasses

    from clustertune import api
    from clustertune.errors import RecipeError
    from clustertune.tasks import TASKS

    runs = tmp_path / "runs"
    made = completed(runs, "pretrained")
    monkeypatch.setitem(TASKS, "causal_lm", dataclasses.replace(TASKS["causal_lm"], base_model_from_run=False))
    with pytest.raises(RecipeError) as err:
        api.validate(_on_run(TINY_CAUSAL, f"run:{made.id}", runs))
    assert [p.key for p in err.value.problems] == ["model.name_or_path"]
    assert "task causal_lm cannot start from another run's model" in str(err.value)


def test_one_resolver_names_runs_for_recipes_and_for_the_commands_alike(tmp_path: Path) -> None:
    """``run:<id>`` in a recipe and ``<id>`` on the command line (generate, eval, export) are
    resolved by one function: the same run, the same errors."""
    from clustertune.models.run_models import resolve_run_model
    from clustertune.use.load import find_target

    runs = tmp_path / "runs"
    made = completed(runs, "pretrained")
    assert resolve_run_model("gpt2", "model.name_or_path", runs) is None  # a hub name is not a run's
    found = resolve_run_model("run:pretrained", "model.name_or_path", runs)
    assert found is not None and found.run.id == made.id and found.step is None and found.path == made.paths.model
    assert find_target("pretrained", runs).run.id == made.id
    for ref, typed in ((f"run:{made.id}@step-2", f"{made.id}@step-2"), ("run:nosuch", "nosuch")):
        with pytest.raises(RunError) as in_recipe:
            resolve_run_model(ref, "model.name_or_path", runs)
        with pytest.raises(RunError) as typed_in:
            find_target(typed, runs)
        assert str(in_recipe.value) == f"model.name_or_path: {typed_in.value}"


def test_a_causal_lm_run_trains_from_another_runs_model(llama_base: Path, tmp_path: Path) -> None:
    """Continued pre-training from a finished run: the run loads that run's weights (it said
    "not in the HF cache" of a name like ``run:<id>`` before)."""
    import shutil

    from clustertune import api

    runs = tmp_path / "runs"
    made = completed(runs, "pretrained")
    shutil.rmtree(made.paths.model)
    shutil.copytree(llama_base, made.paths.model)
    recipe = _on_run(TINY_CAUSAL, f"run:{made.id}", runs)
    recipe["model"].pop("tokenizer"), recipe["model"].pop("tokenizer_vocab_size")  # the run's own, beside its model
    recipe["train"].update(max_steps=2, eval_at_start=False)
    done = api.run(recipe, show_progress=False)
    assert done.state is RunState.COMPLETED
    assert yaml.safe_load(done.paths.recipe.read_text())["model"]["name_or_path"] == str(made.paths.model)
