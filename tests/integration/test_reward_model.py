"""``task: reward_model``: a scalar head trained on preference pairs with the Bradley-Terry loss,
evaluated by pairwise accuracy on held-out pairs, checkpointed and resumed like every task, and
used as a GRPO reward (``rl.rewards: [{model: run:<id>}]``), all offline on the generated pairs."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import torch

import clustertune as ct
from clustertune.errors import DataError, RecipeError
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.recipe import dump_recipe
from tests.helpers import cli, read_jsonl, with_
from tests.rl_fixtures import grpo_recipe


def rm_recipe(base: Run, runs_root: Path, **train: Any) -> dict[str, Any]:
    return {
        "name": "tinyrm", "task": "reward_model",
        "model": {"name_or_path": f"run:{base.id}"},
        "data": {"dataset": "builtin:pydoc-preferences", "max_length": 64, "validation_fraction": 0.1,
                 "max_eval_samples": 128},
        "train": {"precision": "fp32", "batch_size": 16, "lr": 1e-3, "max_steps": 60, "log_every": 10,
                  "eval_every": 30, "eval_at_start": True, "save_every": 30, "cpu_threads": 1, **train},
        "tracking": {"runs_root": str(runs_root)},
    }


@pytest.fixture(scope="module")
def reward_run(tiny_policy_run: Run, rl_runs_root: Path) -> Run:
    run = ct.run(ct.load_recipe(rm_recipe(tiny_policy_run, rl_runs_root)), show_progress=False)
    assert run.state is RunState.COMPLETED
    return run


def test_pairwise_accuracy_rises_from_chance_on_held_out_pairs(reward_run: Run) -> None:
    evals = [r for r in read_jsonl(reward_run.paths.metrics) if r["kind"] == "eval"]
    assert [e["step"] for e in evals] == [0, 30, 60]
    first, last = evals[0], evals[-1]
    assert set(last) >= {"eval_loss", "eval_accuracy"} and "eval_perplexity" not in last
    # A fresh head scores every text alike: the loss starts at log 2 and the accuracy near chance
    # (128 pairs); the pairs' taste (more letters "e") is learnt well above it.
    assert abs(first["eval_loss"] - 0.6931) < 0.02 and 0.3 < first["eval_accuracy"] < 0.65
    assert last["eval_accuracy"] > 0.7 and last["eval_loss"] < first["eval_loss"] - 0.1
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(reward_run.paths.model))
    assert model.config.num_labels == 1 and model.config.id2label == {0: "reward"}


def test_the_scores_order_a_held_out_pair_as_its_accuracy_counts(reward_run: Run) -> None:
    """The saved model alone, as a user loads it: chosen texts score higher on most held-out pairs."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from clustertune.data.builtin import builtin_rows

    model = AutoModelForSequenceClassification.from_pretrained(str(reward_run.paths.model)).eval()
    tok = AutoTokenizer.from_pretrained(str(reward_run.paths.model))
    rows = builtin_rows("pydoc-preferences")[-64:]
    won = 0
    with torch.no_grad():
        for r in rows:
            enc = tok([r["prompt"] + r["chosen"], r["prompt"] + r["rejected"]], return_tensors="pt", padding=True)
            chosen, rejected = model(**enc).logits[:, 0].tolist()
            won += chosen > rejected
    assert won / len(rows) > 0.65


def test_killed_and_resumed_it_ends_on_the_uninterrupted_model(tiny_policy_run: Run, reward_run: Run,
                                                              rl_runs_root: Path, tmp_path: Path) -> None:
    """SIGKILL after step 40 (the last checkpoint is step 30), then --resume: the final model is
    bit-identical to the run never interrupted (the data position, RNG and optimizer travel)."""
    from safetensors.torch import load_file

    path = tmp_path / "rm.yaml"
    path.write_text(dump_recipe(ct.load_recipe(rm_recipe(tiny_policy_run, rl_runs_root))))
    res = cli("run", str(path), "--no-progress", "--runs-root", str(rl_runs_root),
              env={"CLUSTERTUNE_FAULT_KILL_AT_STEP": "40"})
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    run_id = next(line.split()[1] for line in res.stderr.splitlines() if line.startswith("run tinyrm-"))[:-1]
    run = ct.run(resume=run_id, runs_root_dir=rl_runs_root, show_progress=False)
    assert run.state is RunState.COMPLETED and run.attempts[-1].resumed_from == "step-00000030"
    a = load_file(str(run.paths.model / "model.safetensors"))
    b = load_file(str(reward_run.paths.model / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    evals = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"]
    assert evals[-1]["eval_accuracy"] == [r for r in read_jsonl(reward_run.paths.metrics)
                                          if r["kind"] == "eval"][-1]["eval_accuracy"]


def test_a_trained_reward_model_is_a_grpo_reward(tiny_policy_run: Run, reward_run: Run, rl_runs_root: Path) -> None:
    recipe = grpo_recipe(str(tiny_policy_run.paths.model), rl_runs_root,
                         rewards=[{"model": f"run:{reward_run.id}"}])  # no label: the model's score is the reward
    recipe["train"].update(max_steps=4, log_every=2)
    recipe["data"]["max_eval_samples"] = 16
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED
    train = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert len(train) == 2
    # Scores, not probabilities: unbounded, different per completion, and not in (0, 1) alone.
    assert all(r["reward_std"] > 0.0 for r in train)
    ev = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"][-1]
    name = next(k for k in ev if k.startswith("eval_reward/"))
    assert "[" not in name  # named after the model, no label


def test_a_classifier_without_a_label_is_refused_as_a_reward(tiny_policy_run: Run, tiny_classifier_run: Run,
                                                            rl_runs_root: Path) -> None:
    from clustertune.errors import RewardError

    recipe = grpo_recipe(str(tiny_policy_run.paths.model), rl_runs_root,
                         rewards=[{"model": f"run:{tiny_classifier_run.id}"}])
    recipe["train"].update(max_steps=2)
    with pytest.raises((RewardError, RecipeError), match=r"rl\.rewards\.0\.label: required"):
        ct.run(ct.load_recipe(recipe), show_progress=False)


def test_pairs_missing_a_column_name_the_key(tiny_policy_run: Run, rl_runs_root: Path) -> None:
    recipe = with_(rm_recipe(tiny_policy_run, rl_runs_root), data={"chosen_column": "better"})
    with pytest.raises((DataError, RecipeError), match=r"data\.chosen_column \('better'\): not a column"):
        ct.run(ct.load_recipe(recipe), show_progress=False)
