"""The side-by-side benchmark's variants and sizes by name (:mod:`clustertune.train.bench`), known
without torch: ``clustertune bench --help`` shows them."""

from __future__ import annotations

VARIANTS = ("clustertune", "clustertune-eager", "trainer", "trainer-compile")
SIZES = ("auto", "tiny", "small", "gpt2")


def bench_variants() -> tuple[str, ...]:
    """Every variant ``clustertune bench`` measures, in the order it measures them."""
    return VARIANTS
