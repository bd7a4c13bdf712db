"""Reward functions shipped with clustertune, for recipes and for trying RL out offline.

A reward function takes the prompts and the completions (keyword arguments ``prompts`` and
``completions``, lists of strings of the same length) plus its own keyword arguments from the
recipe, and returns one float per completion.

Both rewards here are *dense*: a barely trained policy already earns a little of them on most
completions, so the completions of one prompt differ in reward and GRPO has a signal from the
first step. A sparse reward (one rare word, an exact answer) gives such a policy all-zero groups
and nothing to learn from. Their optimum is obvious and measurable: 1.0 for a completion made
only of the chosen characters or words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"[A-Za-z']+")


def char_fraction(prompts: Sequence[str], completions: Sequence[str], chars: str = "e") -> list[float]:
    """Fraction of the completion's non-space characters that are in ``chars`` (case-insensitive).

    An empty (or all-space) completion scores 0.
    """
    wanted = set(chars.lower())
    out = []
    for text in completions:
        visible = [c for c in text.lower() if not c.isspace()]
        out.append(sum(c in wanted for c in visible) / len(visible) if visible else 0.0)
    return out


# Shipped for recipes (rl.rewards[].function: clustertune.rewards:word_fraction): referenced by name, not called here.
def word_fraction(prompts: Sequence[str], completions: Sequence[str], words: Sequence[str] | str = ("the",)) -> list[float]:
    """Fraction of the completion's words that are among ``words`` (case-insensitive)."""
    wanted = {w.lower() for w in ([words] if isinstance(words, str) else words)}
    out = []
    for text in completions:
        found = _WORD.findall(text.lower())
        out.append(sum(w in wanted for w in found) / len(found) if found else 0.0)
    return out
