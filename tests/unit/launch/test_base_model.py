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
from tests.helpers import TINY_CAUSAL


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

    def launch(recipe: Any, *, runs_root_dir: Any = None, **_: Any) -> Run:  # stands in for training it
        trained.append(recipe.name)
        return completed(Path(runs_root_dir), recipe.name)

    monkeypatch.setattr(submit, "launch", launch)
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
