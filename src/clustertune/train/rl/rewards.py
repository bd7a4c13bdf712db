"""Rewards for GRPO/RLOO: Python functions by import path and classifier models, weighted.

Every score is checked before TRL sees it: one finite number per completion. A function that
raises stops the run with the function's own traceback as the user's error (once, not one
per step), so the runner can save a checkpoint and mark the run FAILED with that reason.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clustertune.errors import RewardError
from clustertune.recipe.rl_schema import RewardSpec
from clustertune.tasks.reward_style import load_reward
from clustertune.runs.user_code import user_traceback as _user_traceback
from clustertune.models.tokenizer import load_tokenizer
from clustertune.models.build import announced_load
from clustertune.errors import ModelError


def check_scores(scores: Any, n: int, name: str) -> list[float]:
    """One finite float per completion, or RewardError naming the first bad value."""
    try:
        values = list(scores)
    except TypeError:
        raise RewardError(f"reward {name} returned a {type(scores).__name__}; it must return a list of {n} floats") from None
    if len(values) != n:
        raise RewardError(f"reward {name} returned {len(values)} scores for {n} completions; it must return one float per completion")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__float__"):
            raise RewardError(f"reward {name} returned a non-number at position {i}: {v!r} ({type(v).__name__}); scores must be floats")
        f = float(v)
        if not math.isfinite(f):
            raise RewardError(f"reward {name} returned {f} at position {i}; scores must be finite numbers")
        out.append(f)
    return out


class FunctionReward:
    """A user's reward function, called with prompts and completions as text (TRL's way) or with
    prompt + completion samples (TRLX's way), as its signature asks."""

    def __init__(self, spec: RewardSpec, key: str):
        assert spec.function is not None
        self.spec, self.key = spec, key
        self.call = load_reward(spec.function, spec.kwargs, f"{key}.function")
        self.name = spec.function.rsplit(":", 1)[1]

    def __call__(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        try:
            scores = self.call(prompts, completions)
        except Exception as exc:
            raise RewardError(f"reward function {self.spec.function} raised:\n{_user_traceback(exc)}") from exc
        return check_scores(scores, len(completions), self.spec.function or self.name)


def label_index(config: Any, label: str | int, where: str, key: str) -> int:
    """Index of ``label`` (a name in id2label, or an index) in a classifier's config."""
    id2label = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    n = int(getattr(config, "num_labels", len(id2label)) or len(id2label))
    if isinstance(label, int) and not isinstance(label, bool):
        if 0 <= label < n:
            return label
    else:
        for i, name in id2label.items():
            if name == str(label):
                return i
        if str(label).isdigit() and int(label) < n:
            return int(label)
    names = ", ".join(f"{i}={id2label.get(i, i)}" for i in range(n))
    raise RewardError(f"{key}: label {label!r} is not a label of the reward model {where}; its labels are {names}")


class ModelReward:
    """Probability of one label of a sequence classifier for prompt + completion."""

    def __init__(self, spec: RewardSpec, key: str, path: str, device: Any = "cpu"):
        from transformers import AutoModelForSequenceClassification

        self.key, self.path = key, path
        self.tokenizer = load_tokenizer(path, f"{key}.model")
        try:
            with announced_load(path, f"{key}.model"):
                self.model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
        except (OSError, ValueError) as exc:
            raise ModelError(f"{key}.model: cannot load a sequence classifier from {path!r}: {exc}") from exc
        # A reward model (one output, task reward_model) gives its score itself; a classifier
        # gives the probability of the label named.
        self.scalar = spec.label is None
        if self.scalar and int(getattr(self.model.config, "num_labels", 2)) != 1:
            names = ", ".join(str(v) for v in (getattr(self.model.config, "id2label", None) or {}).values())
            raise RewardError(f"{key}.label: required for {path}, a classifier with labels {names}: name the "
                              "label whose probability is the reward (a reward model, one output, needs none)")
        self.index = 0 if self.scalar else label_index(self.model.config, spec.label, path, f"{key}.label")
        self.name = f"{os.path.basename(path.rstrip('/')) or path}" + ("" if self.scalar else f"[{spec.label}]")
        limit = getattr(self.model.config, "max_position_embeddings", None) or getattr(self.model.config, "n_positions", 512)
        self.max_length = min(int(limit), int(getattr(self.tokenizer, "model_max_length", limit) or limit))

    def __call__(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        import torch

        texts = [p + c for p, c in zip(prompts, completions)]
        tok = self.tokenizer
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        with torch.no_grad():
            enc = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
            enc = {k: v.to(self.model.device) for k, v in enc.items()}
            logits = self.model(**enc).logits.float()
            scores = logits[:, 0] if self.scalar else logits.softmax(-1)[:, self.index]
        return check_scores(scores.tolist(), len(completions), self.name)


@dataclass
class Reward:
    """One named, weighted reward; ``trl_function`` adapts it to TRL's calling convention."""

    name: str
    weight: float
    score: Callable[[Sequence[str], Sequence[str]], list[float]]

    def trl_function(self) -> Callable[..., list[float]]:
        def reward(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
            return self.score([_text(p) for p in prompts], [_text(c) for c in completions])

        reward.__name__ = self.name  # TRL names the per-reward metrics after it
        return reward


def _text(x: Any) -> str:
    """TRL passes plain strings for standard prompts (conversational data would be message lists)."""
    if isinstance(x, str):
        return x
    if isinstance(x, list) and x and isinstance(x[-1], dict):
        return str(x[-1].get("content", ""))
    return str(x)


def build_rewards(specs: Sequence[RewardSpec], model_paths: Sequence[str | None], device: Any = "cpu") -> list[Reward]:
    """The recipe's rewards, loaded; ``model_paths`` holds each model reward's resolved directory."""
    out: list[Reward] = []
    for i, (spec, path) in enumerate(zip(specs, model_paths)):
        key = f"rl.rewards.{i}"
        scorer: Any = FunctionReward(spec, key) if spec.function else ModelReward(spec, key, path or "", device)
        name = scorer.name
        if any(r.name == name for r in out):
            name = f"{name}_{i}"
        out.append(Reward(name=name, weight=spec.weight, score=scorer))
    return out


def total_reward(rewards: Sequence[Reward], prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
    """Weighted sum of every reward (what GRPO optimises), for evaluation and samples."""
    total = [0.0] * len(completions)
    for r in rewards:
        for j, s in enumerate(r.score(prompts, completions)):
            total[j] += r.weight * s
    return total
