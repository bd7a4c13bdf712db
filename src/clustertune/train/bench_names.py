"""The side-by-side benchmark's variants and sizes by name (:mod:`clustertune.train.bench`), known
without torch: ``clustertune bench --help`` shows them."""

from __future__ import annotations

VARIANTS = ("clustertune", "clustertune-eager", "trainer", "trainer-compile")
# Measured when asked for (--variants): clustertune's compiled step in the other train.compile_mode
# settings, CUDA graphs and kernel autotuning (minutes of compiling on a GPU, seconds on CPU ranks).
MODE_VARIANTS = {"clustertune-graphs": "reduce-overhead", "clustertune-autotune": "max-autotune-no-cudagraphs"}
SIZES = ("auto", "tiny", "small", "gpt2")


def bench_variants() -> tuple[str, ...]:
    """Every variant ``clustertune bench`` measures, in the order it measures them."""
    return VARIANTS
