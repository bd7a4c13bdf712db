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
from clustertune.recipe.schema import Recipe
from clustertune.train.rl.rewards import build_rewards
from clustertune.train.rl.sources import load_rl_data, resolve_model


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


def preflight_rl(recipe: Recipe) -> RawData:
    """Everything an RL run needs, checked; returns the loaded prompts/pairs."""
    from clustertune.models.tokenizer import load_tokenizer

    rl = recipe.rl
    assert rl is not None
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
    rewards = build_rewards(rl.rewards, model_paths)
    # One call on two real prompts catches a reward that raises or returns the wrong shape now,
    # before a run directory exists, rather than after the first generation.
    probe = list(raw.train["prompt"][:2])
    for r in rewards:
        r.score(probe, [" the probe completion", ""][: len(probe)])
    return raw
