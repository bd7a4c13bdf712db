"""``task: rlhf``: a policy tuned against rewards (GRPO, RLOO, PPO) or on preference pairs (DPO)
by TRL's trainers, which run their own loop on their own prompts (see the ``rl`` section);
clustertune feeds their metrics, checkpoints and stop requests into the run."""

from typing import Any

from clustertune.errors import UserError
from clustertune.models.local import locate_model
from clustertune.recipe.load import shipped_recipes
from clustertune.recipe.rl_schema import model_refs
from clustertune.recipe.run_refs import run_part
from clustertune.tasks.base import Task


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
            name = run_part(ref)
            if name in shipped_recipes():
                text += f"; train it first with `clustertune run {name}`"
            out.append((key, text))
    return out


RLHF = Task(name="rlhf", summary="reinforcement learning from feedback",
            model_noun="A policy tuned with reinforcement learning", checks=_checks,
            base_model_from_run=True, base_key="rl.policy")
