"""A recipe that passed the preflight, as a type: holding a :class:`Checked` is the proof, so the
launch that follows does not check again what the preflight did."""

from __future__ import annotations

from dataclasses import dataclass

from clustertune.recipe.schema import Recipe


@dataclass(frozen=True)
class Checked:
    """A recipe that passed the preflight (:func:`clustertune.api.preflight.check`), and what it
    could not check offline (one line each)."""

    recipe: Recipe
    not_checked: list[str]
