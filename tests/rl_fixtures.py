"""Shared pieces of the RL tests: a tiny policy (trained once per session), tiny RL recipes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import TINY_CAUSAL, TINY_CLS, with_

REWARD_E = {"function": "clustertune.rewards:char_fraction", "kwargs": {"chars": "e"}}


def grpo_recipe(policy: str, runs_root: Path, **rl: Any) -> dict[str, Any]:
    return {
        "name": "tinygrpo", "task": "rlhf",
        "data": {"dataset": "builtin:pydoc-prompts", "max_eval_samples": 64, "max_train_samples": 512},
        "train": {"precision": "fp32", "batch_size": 8, "lr": 3e-3, "max_steps": 40, "log_every": 10, "cpu_threads": 1},
        "tracking": {"runs_root": str(runs_root)},
        "rl": {"algorithm": "grpo", "policy": policy, "rewards": [REWARD_E], "max_new_tokens": 16,
               "num_generations": 4, **rl},
    }


def dpo_recipe(policy: str, runs_root: Path, **rl: Any) -> dict[str, Any]:
    return {
        "name": "tinydpo", "task": "rlhf",
        "data": {"dataset": "builtin:pydoc-preferences", "max_eval_samples": 128},
        "train": {"precision": "fp32", "batch_size": 8, "lr": 2e-3, "max_steps": 40, "log_every": 10, "cpu_threads": 1},
        "tracking": {"runs_root": str(runs_root)},
        "rl": {"algorithm": "dpo", "policy": policy, "beta": 0.1, **rl},
    }


@pytest.fixture(scope="session")
def rl_runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rl-runs")


@pytest.fixture(scope="session")
def tiny_policy_run(rl_runs_root: Path) -> Any:
    """A tiny GPT-2 briefly trained on the builtin corpus: the policy of every RL test."""
    import clustertune as ct

    run = ct.run(ct.load_recipe(TINY_CAUSAL, ["train.max_steps=30", "train.eval_at_start=false"]),
                 runs_root_dir=rl_runs_root, show_progress=False)
    assert run.state.value == "COMPLETED"
    return run


@pytest.fixture(scope="session")
def tiny_classifier_run(rl_runs_root: Path) -> Any:
    """A tiny prose-vs-code classifier trained by the classification task: a reward model."""
    import clustertune as ct

    run = ct.run(ct.load_recipe(with_(TINY_CLS, name="tinyreward")), runs_root_dir=rl_runs_root, show_progress=False)
    assert run.state.value == "COMPLETED"
    return run


@pytest.fixture(scope="session")
def policy_reward_model_run(tiny_policy_run: Any, rl_runs_root: Path) -> Any:
    """A prose-vs-code classifier trained from the tiny policy, so it shares the policy's tokenizer:
    the reward model TRL's PPO needs (it scores the policy's token ids as they are)."""
    import clustertune as ct

    recipe = with_(TINY_CLS, name="policyreward", train={"max_steps": 60})
    recipe["model"] = {"name_or_path": str(tiny_policy_run.paths.model), "num_labels": 2}
    run = ct.run(ct.load_recipe(recipe), runs_root_dir=rl_runs_root, show_progress=False)
    assert run.state.value == "COMPLETED"
    return run
