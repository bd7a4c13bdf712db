"""Recipes: the typed schema, each task's declared traits (``task_traits.py``) and the loader
(YAML + ``key=value`` overrides). Imports only errors, fsutil and the other bottom modules."""

from clustertune.recipe.load import dump_recipe, load_recipe, resolve_recipe_path, shipped_recipes
from clustertune.recipe.schema import Recipe

__all__ = ["Recipe", "dump_recipe", "load_recipe", "resolve_recipe_path", "shipped_recipes"]
