"""Checks of an RL recipe that need files or models, run before any run directory exists.

Each failure is a typed UserError naming the recipe key and the fix: a policy that cannot be
found, a reward function that does not import, a reward model without the named label, no
prompts, a preference dataset without its columns, a reference with another tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustertune.data.sources import RawData
from clustertune.errors import ModelError
from clustertune.recipe.rl_recipe import as_rl_recipe
from clustertune.recipe.schema import Recipe
from clustertune.train.rl.rewards import build_rewards
from clustertune.train.rl.sources import load_rl_data, resolve_model
from clustertune.models.tokenizer import load_tokenizer


CAUSAL_LM = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def _vocab(tok: Any) -> dict[str, int]:
    return dict(tok.get_vocab())


def check_architecture(path: str, key: str, suffixes: tuple[str, ...], what: str) -> None:
    """A local model directory must hold the kind of model asked for (hub names are checked on load)."""
    config_file = Path(path) / "config.json"
    if not config_file.is_file():
        return
    archs = json.loads(config_file.read_text(encoding="utf-8")).get("architectures") or []
    if archs and not any(a.endswith(suffixes) for a in archs):
        raise ModelError(f"{key}: {path!r} holds a {', '.join(archs)}, not {what}; give a directory with "
                         f"{what} ({' or '.join('*' + s for s in suffixes)})")


def _same_tokenizer(tok: Any, other_path: str, key: str, why: str) -> None:
    a, b = _vocab(tok), _vocab(load_tokenizer(other_path, key))
    if a != b:
        diff = sorted(set(a.items()) ^ set(b.items()))[:3]
        raise ModelError(f"{key}: {other_path!r} has another tokenizer than rl.policy ({len(a)} vs {len(b)} tokens; "
                         f"first differences {diff}); {why}")


def _check_ppo_models(rl: Any, root: str | None, tok: Any, model_paths: list[str | None]) -> None:
    """TRL's PPO feeds the policy's token ids to the reward and value models as they are."""
    reward = model_paths[0]
    assert reward is not None  # the schema requires a reward model for ppo
    _same_tokenizer(tok, reward, "rl.rewards.0.model", "TRL's PPO scores the policy's token ids with it, so train "
                    "the reward model from the policy (model.name_or_path: the policy directory) or use grpo, "
                    "which scores the text")
    if rl.value_model:
        value = resolve_model(rl.value_model, "rl.value_model", root)
        check_architecture(value, "rl.value_model", CAUSAL_LM + ("ForSequenceClassification",),
                           "a causal language model or a sequence classifier")
        _same_tokenizer(tok, value, "rl.value_model", "the value model reads the policy's token ids: "
                        "leave rl.value_model unset (the policy) or give a model with the policy's tokenizer")


def preflight_rl(plain: Recipe) -> RawData:
    """Everything an RL run needs, checked; returns the loaded prompts/pairs."""

    recipe = as_rl_recipe(plain)
    rl = recipe.rl
    root = recipe.tracking.runs_root
    policy = resolve_model(rl.policy, "rl.policy", root)
    check_architecture(policy, "rl.policy", CAUSAL_LM, "a causal language model")
    tok = load_tokenizer(policy, "rl.policy")
    if rl.reference:
        ref = resolve_model(rl.reference, "rl.reference", root)
        check_architecture(ref, "rl.reference", CAUSAL_LM, "a causal language model")
        ref_tok = load_tokenizer(ref, "rl.reference")
        if _vocab(ref_tok) != _vocab(tok):
            a, b = _vocab(tok), _vocab(ref_tok)
            diff = sorted(set(a.items()) ^ set(b.items()))[:3]
            raise ModelError(
                f"rl.reference: {rl.reference!r} has another tokenizer than rl.policy {rl.policy!r} "
                f"({len(a)} vs {len(b)} tokens; first differences {diff}); the KL term compares token "
                "probabilities, so use a reference that shares the policy's tokenizer (or leave rl.reference unset)"
            )
    raw = load_rl_data(recipe)
    model_paths = [resolve_model(r.model, f"rl.rewards.{i}.model", root) if r.model else None
                   for i, r in enumerate(rl.rewards)]
    for i, path in enumerate(model_paths):
        if path is not None:
            check_architecture(path, f"rl.rewards.{i}.model", ("ForSequenceClassification",), "a sequence classifier")
    if rl.algorithm == "ppo":
        _check_ppo_models(rl, root, tok, model_paths)
    rewards = build_rewards(rl.rewards, model_paths)
    # One call on two real prompts catches a reward that raises or returns the wrong shape now,
    # before a run directory exists, rather than after the first generation.
    probe = list(raw.train["prompt"][:2])
    for r in rewards:
        r.score(probe, [" the probe completion", ""][: len(probe)])
    return raw
