"""KTO through TRL's trainer: on preference pairs (split into a desirable and an undesirable
completion each) and on completions marked desirable or not, one a row."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

import clustertune as ct
from clustertune import api
from clustertune.errors import DataError, RecipeError
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from tests.helpers import read_jsonl
from tests.rl_fixtures import dpo_recipe


def _evals(run: Run) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"]


def _kto(policy: str, runs_root: Path, **data: Any) -> dict[str, Any]:
    recipe = dpo_recipe(policy, runs_root, algorithm="kto")
    recipe["name"] = "tinykto"
    recipe["train"]["max_steps"] = 40
    recipe["data"].update(data)
    return recipe


def test_kto_on_pairs_moves_the_held_out_preferences(tiny_policy_run: Run, rl_runs_root: Path) -> None:
    run = ct.run(ct.load_recipe(_kto(str(tiny_policy_run.paths.model), rl_runs_root)), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    first, last = _evals(run)[0], _evals(run)[-1]
    assert first["eval_gain"] == 0.0 and last["eval_samples"] >= 100
    assert last["eval_gain"] > 5 * last["eval_gain_stderr"] and last["eval_gain_accuracy"] > 0.7
    # KTO's loss measures against a batch-level KL estimate that moves too: the held-out gain
    # above is the figure that says it learned. TRL's own log rows reach metrics.jsonl.
    train = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert [r["step"] for r in train] == [10, 20, 30, 40] and all(isinstance(r["loss"], float) for r in train)
    assert yaml.safe_load(run.paths.recipe.read_text())["rl"]["algorithm"] == "kto"


def _unpaired(path: Path, n: int, label: Any = None) -> Path:
    from clustertune.train.rl.sources import builtin_rl_rows

    rows = []
    for r in builtin_rl_rows("pydoc-preferences", 0)[:n]:
        rows += [{"prompt": r["prompt"], "completion": r["chosen"], "label": True if label is None else label},
                 {"prompt": r["prompt"], "completion": r["rejected"], "label": False if label is None else label}]
    random.Random(0).shuffle(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_kto_on_completions_marked_desirable(tiny_policy_run: Run, rl_runs_root: Path, tmp_path: Path) -> None:
    data = {"dataset": None, "train_files": [str(_unpaired(tmp_path / "thumbs.jsonl", 300))], "validation_fraction": 0.2}
    run = ct.run(ct.load_recipe(_kto(str(tiny_policy_run.paths.model), rl_runs_root, **data)), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    first, last = _evals(run)[0], _evals(run)[-1]
    assert first["eval_gain"] == 0.0 and "eval_margin" not in last  # no pairs: gain per labelled completion
    assert last["eval_gain"] > 5 * last["eval_gain_stderr"] and last["eval_gain_accuracy"] > 0.6
    assert last["eval_logp_desirable"] > last["eval_logp_undesirable"]


def test_bad_kto_inputs_name_the_key(tiny_policy_run: Run, rl_runs_root: Path, tmp_path: Path) -> None:
    policy = str(tiny_policy_run.paths.model)
    bad = _unpaired(tmp_path / "bad.jsonl", 20, label="maybe")
    with pytest.raises(DataError, match=r"rl.label_column: '.*bad.jsonl' line \d+ \(train\) has 'maybe' in column 'label'"):
        ct.run(ct.load_recipe(_kto(policy, rl_runs_root, dataset=None, train_files=[str(bad)])), show_progress=False)
    one_sided = _unpaired(tmp_path / "up.jsonl", 20, label=True)
    with pytest.raises(DataError, match=r"every train row of column 'label' is True"):
        ct.run(ct.load_recipe(_kto(policy, rl_runs_root, dataset=None, train_files=[str(one_sided)])),
               show_progress=False)
    with pytest.raises(RecipeError, match=r"rl.desirable_weight: only used by algorithm: kto"):
        api.validate(dpo_recipe(policy, rl_runs_root, desirable_weight=2.0))
    with pytest.raises(RecipeError, match=r"rl.rewards: KTO learns from preference data"):
        api.validate(_kto(policy, rl_runs_root) | {"rl": {**_kto(policy, rl_runs_root)["rl"],
                                                           "rewards": [{"function": "clustertune.rewards:char_fraction"}]}})
