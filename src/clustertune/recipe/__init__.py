"""Recipes: the typed schema and the loader (YAML + ``key=value`` overrides)."""

from clustertune.recipe.load import dump_recipe, load_recipe, resolve_recipe_path, shipped_recipes
from clustertune.recipe.schema import Recipe

__all__ = ["Recipe", "dump_recipe", "load_recipe", "resolve_recipe_path", "shipped_recipes"]
