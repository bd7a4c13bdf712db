"""The recipe type of an RL run: a :class:`Recipe` whose ``rl`` section is always there.

The schema already requires the section for task ``rlhf``; this type says so to the code, so
the RL trainers read ``recipe.rl`` without checking it again. :func:`as_rl_recipe` makes one at
the boundary (the RL preflight and the node entry).
"""

from __future__ import annotations

from typing import Literal

from clustertune.errors import Problem, RecipeError
from clustertune.recipe.rl_schema import RLSection
from clustertune.recipe.schema import Recipe


class RLRecipe(Recipe):
    """A recipe of task ``rlhf``."""

    task: Literal["rlhf"] = "rlhf"
    rl: RLSection


def as_rl_recipe(recipe: Recipe) -> RLRecipe:
    if isinstance(recipe, RLRecipe):
        return recipe
    if recipe.task != "rlhf" or recipe.rl is None:
        raise RecipeError([Problem(key="rl", message="an RL run needs task: rlhf and an rl section",
                                   hint="set task: rlhf and describe the policy and rewards under rl:")])
    return RLRecipe.model_validate(recipe.model_dump())
