"""Bad input to RL recipes: each gets a typed error naming the key and the fix, before a run exists."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import clustertune as ct
from clustertune.api import validate
from clustertune.errors import DataError, ModelError, RecipeError, RewardError, RunError
from clustertune.recipe.rl_schema import RLSection, RewardSpec
from clustertune.rewards import char_fraction, word_fraction
from clustertune.train.rl import preflight_rl
from clustertune.train.rl.rewards import check_scores
from clustertune.train.rl.sources import builtin_rl_rows
from tests.helpers import cli_here, tree_snapshot
from tests.rl_fixtures import dpo_recipe, grpo_recipe


def recipe_with(base: dict[str, Any], **rl: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(base))
    out["rl"].update(rl)
    return out


@pytest.fixture
def reward_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user's reward module in the current directory, with good and bad functions."""
    name = f"user_rewards_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        "def good(prompts, completions):\n    return [len(c) / 100 for c in completions]\n"
        "def raises(prompts, completions):\n    return 1 / 0  # user bug\n"
        "def too_few(prompts, completions):\n    return [0.5]\n"
        "def nan(prompts, completions):\n    return [float('nan')] * len(completions)\n"
        "def words(prompts, completions):\n    return ['high'] * len(completions)\n"
    )
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def trlx_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A user's reward module ported from TRLX scripts, in the current directory."""
    name = f"trlx_rewards_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        "seen = []\n"
        "def reward_fn(samples, **kwargs):\n"
        "    seen.append((list(samples), sorted(kwargs)))\n"
        "    return [float(len(s)) for s in samples]\n"
        "def with_outputs(samples, prompts, outputs, bonus=0.0):\n"
        "    return [float(s == p + o) + bonus for s, p, o in zip(samples, prompts, outputs)]\n"
        "def samples_only(samples):\n"
        "    return [1.0] * len(samples)\n"
        "def needs_tokenizer(samples, tokenizer):\n"
        "    return [1.0] * len(samples)\n"
        "def neither(texts):\n"
        "    return [0.0] * len(texts)\n"
        "def trl_without_kwargs(prompts, completions):\n"
        "    return [0.0] * len(completions)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    yield importlib.import_module(name)
    sys.modules.pop(name, None)


# -- reward functions: TRL's and TRLX's calling styles ------------------------------------------

def test_trlx_style_reward_function_scores_prompt_plus_completion_samples(trlx_module: Any) -> None:
    from clustertune.train.rl.rewards import build_rewards

    name = trlx_module.__name__
    specs = [RewardSpec(function=f"{name}:reward_fn"), RewardSpec(function=f"{name}:with_outputs", kwargs={"bonus": 1}),
             RewardSpec(function=f"{name}:samples_only"), RewardSpec(function="clustertune.rewards:char_fraction")]
    rewards = build_rewards(specs, [None] * len(specs))
    # As TRL's GRPO calls each reward (with its own extra keyword arguments).
    scores = [r.trl_function()(prompts=["Q: a", "Q: bb"], completions=[" yes", " no"], completion_ids=[[1], [2]])
              for r in rewards]
    assert scores[0] == [8.0, 8.0]  # len("Q: a yes"), len("Q: bb no"): the samples are prompt + completion
    assert trlx_module.seen == [(["Q: a yes", "Q: bb no"], ["outputs", "prompts"])]  # and, like TRLX, the parts
    assert scores[1] == [2.0, 2.0] and scores[2] == [1.0, 1.0]
    assert scores[3] == [1 / 3, 0.0]  # TRL's style, unchanged: the completions alone (" yes": 1 e in 3)


def test_reward_function_of_neither_style_is_a_typed_error_naming_it_and_the_fix(trlx_module: Any) -> None:
    from clustertune.tasks.reward_style import load_reward

    name = trlx_module.__name__
    with pytest.raises(RewardError) as ei:
        load_reward(f"{name}:neither", {}, "rl.rewards.0.function")
    msg = str(ei.value)
    assert msg.startswith(f"rl.rewards.0.function: reward function {name}:neither(texts) fits neither calling style")
    assert "def neither(prompts, completions, **kwargs)" in msg and "def neither(samples, **kwargs)" in msg
    with pytest.raises(RewardError, match=r"TRLX's call would fail: missing a required argument: 'tokenizer'"):
        load_reward(f"{name}:needs_tokenizer", {}, "rl.rewards.1.function")
    with pytest.raises(RewardError, match=r"unexpected keyword argument 'chars'.*remove them from rl.rewards.2.kwargs"):
        load_reward(f"{name}:trl_without_kwargs", {"chars": "e"}, "rl.rewards.2.function")
    with pytest.raises(RewardError, match=r"rl.rewards.3.kwargs: samples is passed by clustertune itself"):
        load_reward(f"{name}:reward_fn", {"samples": ["x"]}, "rl.rewards.3.function")


def test_validate_refuses_a_reward_function_of_neither_style(trlx_module: Any, tmp_path: Path) -> None:
    name = trlx_module.__name__
    r = recipe_with(grpo_recipe("gpt2", tmp_path / "runs"), rewards=[{"function": f"{name}:reward_fn"},
                                                                     {"function": f"{name}:neither"}])
    with pytest.raises(RecipeError) as ei:
        validate(r)
    found = {p.key: p.message for p in ei.value.problems}
    assert "rl.rewards.0.function" not in found  # TRLX's style is accepted
    assert "fits neither calling style" in found["rl.rewards.1.function"]
    p = tmp_path / "grpo.yaml"
    p.write_text(json.dumps(r))
    res = cli_here("validate", str(p), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{name}:neither(texts) fits neither calling style" in res.stderr


# -- schema: cross-field checks (no files, no network) ------------------------------------------

def test_schema_cross_field_problems_all_at_once(tmp_path: Path) -> None:
    bad = grpo_recipe("some/dir", tmp_path)
    bad["rl"]["rewards"] = []
    bad["model"] = {"config": "gpt2", "tokenizer": "train"}
    bad["train"]["batch_size"] = 6
    with pytest.raises(RecipeError) as ei:
        ct.load_recipe(bad)
    keys = {p.key for p in ei.value.problems}
    assert {"rl.rewards", "model", "train.batch_size"} <= keys
    assert "not a multiple of rl.num_generations=4" in str(ei.value)


def test_ppo_takes_exactly_one_reward_model_and_no_reward_function(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as ei:
        ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), algorithm="ppo", top_p=0.9))
    msg = str(ei.value)
    assert {p.key for p in ei.value.problems} == {"rl.rewards.0.function", "rl.top_p"}
    assert "TRL's PPO takes a reward model, not a reward function" in msg and "algorithm: grpo" in msg
    two = [{"model": "rm", "label": 1}, {"model": "rm2", "label": 1, "weight": 0.5}]
    with pytest.raises(RecipeError) as ei:
        ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), algorithm="ppo", rewards=two))
    assert {p.key for p in ei.value.problems} == {"rl.rewards"} and "exactly one reward model, got 2" in str(ei.value)
    ok = ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), algorithm="ppo", rewards=[{"model": "rm", "label": 1}],
                                    ppo_epochs=2))
    assert ok.rl is not None and ok.rl.algorithm == "ppo" and ok.rl.ppo_epochs == 2
    # TRL 1.12's PPO cannot save under several processes: refused before anything starts.
    many = recipe_with(grpo_recipe("p", tmp_path), algorithm="ppo", rewards=[{"model": "rm", "label": 1}])
    many["launch"] = {"procs_per_node": 2}
    with pytest.raises(RecipeError, match="launch.procs_per_node: TRL 1.12's PPOTrainer runs on one process only"):
        ct.load_recipe(many)
    # PPO's own knobs are errors elsewhere, not silently ignored.
    with pytest.raises(RecipeError, match="rl.value_model: only used by algorithm: ppo"):
        ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), value_model="v"))


def test_ppo_given_trlx_style_reward_functions_shows_the_same_rewards_under_grpo_and_rloo(tmp_path: Path) -> None:
    import yaml

    rewards = [{"function": "my_rewards:score"},
               {"function": "clustertune.rewards:char_fraction", "kwargs": {"chars": "e"}, "weight": 0.5},
               {"model": "rm", "label": 1}]
    with pytest.raises(RecipeError) as ei:
        ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), algorithm="ppo", rewards=rewards))
    (problem,) = ei.value.problems
    assert problem.key == "rl.rewards.0.function" and "TRL's PPO takes a reward model" in problem.message
    # The shown lines are a recipe's rl section: pasted over the PPO recipe, it loads with the same rewards.
    shown = yaml.safe_load(problem.message.split("several processes too: ", 1)[1].split(" (or algorithm: rloo)")[0])
    for algorithm in ("grpo", "rloo"):
        fixed = recipe_with(grpo_recipe("p", tmp_path), **{**shown["rl"], "algorithm": algorithm})
        r = ct.load_recipe(fixed)
        assert r.rl is not None and r.rl.algorithm == algorithm
        assert [x.model_dump(exclude_defaults=True) for x in r.rl.rewards] == rewards


def test_dpo_takes_no_rewards_and_distinct_columns(tmp_path: Path) -> None:
    bad = recipe_with(dpo_recipe("p", tmp_path), rewards=[{"function": "a:b"}], rejected_column="chosen")
    with pytest.raises(RecipeError) as ei:
        ct.load_recipe(bad)
    keys = {p.key for p in ei.value.problems}
    assert keys == {"rl.rewards", "rl.chosen_column"}


def test_reward_spec_shapes(tmp_path: Path) -> None:
    rewards = [{"function": "nocolon"}, {"model": "dir"}, {"function": "a:b", "model": "dir", "label": 1},
               {"function": "a:b", "label": "x"}]
    with pytest.raises(RecipeError) as ei:
        ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), rewards=rewards))
    keys = {p.key for p in ei.value.problems}
    # {"model": "dir"} without a label is a reward model's score; a classifier's missing label is
    # refused where its config is read (tests/integration/test_reward_model.py).
    assert keys == {"rl.rewards.0.function", "rl.rewards.2", "rl.rewards.3.label"}


def test_rl_section_only_with_task_rlhf_and_required_by_it(tmp_path: Path) -> None:
    r = grpo_recipe("p", tmp_path)
    with pytest.raises(RecipeError, match="rl: only valid with task: rlhf"):
        ct.load_recipe({**r, "task": "causal_lm"})
    with pytest.raises(RecipeError, match="rl: required for task rlhf"):
        ct.load_recipe({k: v for k, v in r.items() if k != "rl"})
    with pytest.raises(RecipeError, match="rl.policy: required"):
        ct.load_recipe(recipe_with(r, policy=""))


def test_every_rl_field_is_documented() -> None:
    for model in (RLSection, RewardSpec):
        assert not [n for n, f in model.model_fields.items() if not f.description], model.__name__


def test_cli_validate_exits_2_without_traceback(tmp_path: Path) -> None:
    p = tmp_path / "ppo.yaml"
    p.write_text("task: rlhf\ndata: {dataset: 'builtin:pydoc-prompts'}\n"
                 "rl: {algorithm: ppo, policy: gpt2, rewards: [{function: 'clustertune.rewards:char_fraction'}]}\n")
    res = cli_here("validate", str(p))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "not a reward function" in res.stderr


# -- preflight: files, modules and models -------------------------------------------------------

def test_reward_function_that_cannot_be_imported_names_module_and_sys_path(tiny_policy_run: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = recipe_with(grpo_recipe(str(tiny_policy_run.paths.model), tmp_path), rewards=[{"function": "no_such_rewards_mod:score"}])
    with pytest.raises(RewardError) as ei:
        preflight_rl(ct.load_recipe(r))
    msg = str(ei.value)
    assert "rl.rewards.0.function" in msg and "'no_such_rewards_mod'" in msg and "sys.path" in msg
    assert str(tmp_path) in msg  # the current directory is searched, and said so


def test_missing_attribute_lists_the_module_callables(tiny_policy_run: Any, reward_module: str, tmp_path: Path) -> None:
    r = recipe_with(grpo_recipe(str(tiny_policy_run.paths.model), tmp_path), rewards=[{"function": f"{reward_module}:gud"}])
    with pytest.raises(RewardError, match=r"has no attribute 'gud'; its callables are good, nan, raises, too_few, words"):
        preflight_rl(ct.load_recipe(r))


@pytest.mark.parametrize("fn,expected", [
    ("raises", r"(?s)raised:\nTraceback.*return 1 / 0  # user bug\n.*ZeroDivisionError: division by zero"),
    ("too_few", r"returned 1 scores for 2 completions"),
    ("nan", r"returned nan at position 0; scores must be finite"),
    ("words", r"returned a non-number at position 0: 'high' \(str\)"),
])
def test_bad_reward_functions_are_caught_before_the_run(tiny_policy_run: Any, reward_module: str, tmp_path: Path,
                                                        fn: str, expected: str) -> None:
    runs = tmp_path / "runs"
    r = recipe_with(grpo_recipe(str(tiny_policy_run.paths.model), runs), rewards=[{"function": f"{reward_module}:{fn}"}])
    with pytest.raises(RewardError, match=expected) as ei:
        ct.run(ct.load_recipe(r), show_progress=False)
    assert str(ei.value).count("Traceback") <= 1  # the user's traceback, once
    assert tree_snapshot(runs) == {}  # nothing was created


def test_check_scores_accepts_numbers_of_any_kind() -> None:
    import numpy as np
    import torch

    assert check_scores(np.array([1, 2.5]), 2, "f") == [1.0, 2.5]
    assert check_scores(torch.tensor([0.25, 0.5]), 2, "f") == [0.25, 0.5]
    with pytest.raises(RewardError, match="returned a bool"):
        check_scores(True, 1, "f")
    with pytest.raises(RewardError, match="non-number at position 1: True"):
        check_scores([0.0, True], 2, "f")


def test_reward_model_without_the_label(tiny_policy_run: Any, tiny_classifier_run: Any, tmp_path: Path) -> None:
    rewards = [{"model": str(tiny_classifier_run.paths.model), "label": "POSITIVE"}]
    r = recipe_with(grpo_recipe(str(tiny_policy_run.paths.model), tmp_path), rewards=rewards)
    with pytest.raises(RewardError) as ei:
        preflight_rl(ct.load_recipe(r))
    msg = str(ei.value)
    assert "rl.rewards.0.label: label 'POSITIVE' is not a label of the reward model" in msg
    assert "its labels are 0=LABEL_0, 1=LABEL_1" in msg


def test_empty_prompt_set(tiny_policy_run: Any, tmp_path: Path) -> None:
    f = tmp_path / "prompts.jsonl"
    f.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ["", "  ", "", "   "]))
    r = grpo_recipe(str(tiny_policy_run.paths.model), tmp_path)
    r["data"] = {"train_files": [str(f)]}
    with pytest.raises(DataError, match="rl.prompt_column: the train data has no non-empty prompts in column 'prompt'"):
        preflight_rl(ct.load_recipe(r))


def test_preference_data_missing_a_column(tiny_policy_run: Any, tmp_path: Path) -> None:
    f = tmp_path / "pairs.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"p{i}", "good": "a", "rejected": "b"}) + "\n" for i in range(10)))
    r = dpo_recipe(str(tiny_policy_run.paths.model), tmp_path)
    r["data"] = {"train_files": [str(f)]}
    with pytest.raises(DataError) as ei:
        preflight_rl(ct.load_recipe(r))
    msg = str(ei.value)
    assert "rl.chosen_column: column 'chosen' not in the train data" in msg and "good" in msg
    r["rl"]["chosen_column"] = "good"
    raw = preflight_rl(ct.load_recipe(r))  # naming the column fixes it
    assert raw.train.column_names == ["prompt", "chosen", "rejected"]


def test_reference_with_another_tokenizer(tiny_policy_run: Any, tmp_path: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs()[:200], 300, classification=False, model_max_length=64)
    other = tmp_path / "other-lm"
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=1, n_embd=32, n_head=2, n_positions=64)).save_pretrained(other)
    tok.save_pretrained(other)
    r = recipe_with(grpo_recipe(str(tiny_policy_run.paths.model), tmp_path), reference=str(other))
    with pytest.raises(ModelError, match="rl.reference: .* has another tokenizer than rl.policy"):
        preflight_rl(ct.load_recipe(r))


def test_policy_run_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="rl.policy: no run 'nope-123' under"):
        preflight_rl(ct.load_recipe(grpo_recipe("run:nope-123", tmp_path)))
    with pytest.raises(ModelError, match="rl.policy: directory './missing-policy' does not exist"):
        preflight_rl(ct.load_recipe(grpo_recipe("./missing-policy", tmp_path)))


def test_policy_by_run_prefix_takes_the_newest_completed_run(tiny_policy_run: Any, rl_runs_root: Path) -> None:
    from clustertune.train.rl.sources import resolve_model

    assert resolve_model("run:tiny-", "rl.policy", str(rl_runs_root)) == str(tiny_policy_run.paths.model)


# -- the shipped rewards and pairs --------------------------------------------------------------

def test_shipped_rewards_have_obvious_optima() -> None:
    assert char_fraction(["p"] * 3, ["eee", "e e", "xyz"], chars="e") == [1.0, 1.0, 0.0]
    assert char_fraction(["p"], [""]) == [0.0]
    assert word_fraction(["p"] * 2, ["the The the", "a cat, the dog"], words="the") == [1.0, 0.25]


def test_generated_preference_pairs_prefer_the_reward() -> None:
    rows = builtin_rl_rows("pydoc-preferences", 0)
    assert len(rows) > 1000
    for row in rows[:200]:
        c, r = char_fraction([row["prompt"]] * 2, [row["chosen"], row["rejected"]])
        assert c >= r + 0.05
    assert rows == builtin_rl_rows("pydoc-preferences", 0)  # deterministic for a seed


def test_models_of_the_wrong_kind(tiny_policy_run: Any, tiny_classifier_run: Any, tmp_path: Path) -> None:
    policy, classifier = str(tiny_policy_run.paths.model), str(tiny_classifier_run.paths.model)
    with pytest.raises(ModelError, match=r"rl.policy: .* holds a BertForSequenceClassification, not a causal language model"):
        preflight_rl(ct.load_recipe(grpo_recipe(classifier, tmp_path)))
    r = recipe_with(grpo_recipe(policy, tmp_path), rewards=[{"model": policy, "label": 0}])
    with pytest.raises(ModelError, match=r"rl.rewards.0.model: .* holds a GPT2LMHeadModel, not a sequence classifier"):
        preflight_rl(ct.load_recipe(r))


def test_evaluation_prompts_from_the_recipe_or_the_validation_split(tmp_path: Path) -> None:
    from clustertune.train.rl.sources import eval_prompts, load_rl_data

    r = ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), eval_prompts=["In my opinion"], eval_repeats=256))
    raw = load_rl_data(r)
    assert eval_prompts(r, raw) == ["In my opinion"] * 256
    r = ct.load_recipe(recipe_with(grpo_recipe("p", tmp_path), eval_repeats=2))
    raw = load_rl_data(r)
    held_out = list(raw.validation["prompt"])
    assert len(held_out) == 64  # the validation split, capped by data.max_eval_samples
    assert eval_prompts(r, raw) == [p for p in held_out for _ in range(2)]


def test_rl_recipe_type_has_its_rl_section(tmp_path: Path) -> None:
    from clustertune.recipe.rl_recipe import RLRecipe, as_rl_recipe
    from tests.helpers import TINY_CAUSAL

    rl = as_rl_recipe(ct.load_recipe(grpo_recipe("p", tmp_path)))
    assert isinstance(rl, RLRecipe) and rl.rl.algorithm == "grpo" and as_rl_recipe(rl) is rl
    with pytest.raises(RecipeError, match="rl"):
        as_rl_recipe(ct.load_recipe(TINY_CAUSAL))
