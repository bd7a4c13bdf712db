"""``task: rlhf``: a policy tuned against rewards (GRPO, RLOO, PPO) or on preference pairs (DPO)
by TRL's trainers, which run their own loop on their own prompts (see the ``rl`` section);
clustertune feeds their metrics, checkpoints and stop requests into the run."""

from typing import Any

from clustertune.errors import UserError
from clustertune.models.local import locate_model
from clustertune.recipe.load import shipped_recipes
from clustertune.recipe.rl_schema import RUN_PREFIX
from clustertune.tasks.base import Task


def model_refs(rl: Any) -> list[tuple[str, str]]:
    """(key, reference) for every model the ``rl`` section names."""
    refs = [("rl.policy", rl.policy), ("rl.reference", rl.reference), ("rl.value_model", rl.value_model)]
    refs += [(f"rl.rewards.{i}.model", r.model) for i, r in enumerate(rl.rewards)]
    return [(k, v) for k, v in refs if v]


def _checks(recipe: Any, runs_root: str) -> list[tuple[str, str]]:
    """Every model the ``rl`` section names is there: ``run:<run>`` a run with a final model,
    a local directory one written by save_pretrained (hub names are the loaders' to check)."""
    out = []
    for key, ref in model_refs(recipe.rl):
        try:
            locate_model(ref, key, runs_root)
        except UserError as exc:
            text = str(exc)
            text = text[len(key) + 2:] if text.startswith(f"{key}: ") else text
            name = ref[len(RUN_PREFIX):] if ref.startswith(RUN_PREFIX) else ""
            if name in shipped_recipes():
                text += f"; train it first with `clustertune run {name}`"
            out.append((key, text))
    return out


RLHF = Task(name="rlhf", summary="reinforcement learning from feedback",
            model_noun="A policy tuned with reinforcement learning", checks=_checks)
