"""How much of the data ``data.max_length`` cuts off, printed for every split, and the stop before
training when it is more than a few percent: a run whose answers were cut away learns nothing,
and one info line among many is easy to miss.

SFT counts trained tokens (those that carry the loss); classification counts every token of the
text (the class is read from what is left). An example dropped as too long
(``data.sft.too_long=drop``) counts as cut, with all its trained tokens.
"""

from __future__ import annotations

import logging
from typing import Any

from clustertune.errors import DataError

log = logging.getLogger("clustertune")

LIMIT = 0.05
"""The share of examples or of (trained) tokens cut above which ``data.truncation: error`` stops."""


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "0.0%"


def check_truncation(recipe: Any, split: str, counts: dict[str, int]) -> None:
    """Print the share cut at ``data.max_length`` of one split (its ``counts``: ``examples_read``,
    ``truncated``, ``dropped_too_long``, ``tokens_before_cut``, ``tokens_cut``, ``longest``), and
    raise DataError above :data:`LIMIT` unless ``data.truncation`` is ``allow``."""
    d = recipe.data
    counts = {k: v or 0 for k, v in counts.items()}  # a cache entry's record leaves unknown counts as None
    n = counts.get("examples_read", 0)
    cut = counts.get("truncated", 0) + counts.get("dropped_too_long", 0)
    tokens, tokens_cut = counts.get("tokens_before_cut", 0), counts.get("tokens_cut", 0)
    templated = recipe.traits.templated  # SFT: only the trained tokens count
    what = "trained tokens" if templated else "tokens"
    log.info("data: %s: %d of %d examples (%s) and %d of %d %s (%s) cut at data.max_length=%d", split, cut, n,
             _pct(cut, n), tokens_cut, tokens, what, _pct(tokens_cut, tokens), d.max_length)
    over = (n and cut / n > LIMIT) or (tokens and tokens_cut / tokens > LIMIT)
    if not over or d.truncation == "allow":
        return
    drop = ", leave them out (data.sft.too_long=drop)" if templated and d.sft.too_long != "drop" else ""
    raise DataError(
        f"data.max_length: {_pct(cut, n)} of the {split} examples ({cut} of {n}) and {_pct(tokens_cut, tokens)} of "
        f"their {what} ({tokens_cut} of {tokens}) are cut at data.max_length={d.max_length} (the longest example "
        f"has {counts.get('longest', 0)} tokens); above {LIMIT:.0%} the model learns from text cut short. Raise "
        f"data.max_length (within the model's positions){drop}, shorten the examples, or accept it with "
        "data.truncation=allow")
