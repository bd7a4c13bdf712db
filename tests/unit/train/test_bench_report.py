"""`clustertune bench`'s report: the compile-mode variants (``--variants clustertune-graphs,...``)
are accepted and each is put beside the default compile, from the rows the measurements return."""

from __future__ import annotations

import pytest

from clustertune.train.bench import BenchError, BenchSpec, check_options, report


def test_the_compile_modes_are_variants_and_each_is_reported_against_the_default_compile() -> None:
    spec = BenchSpec.preset("tiny")
    check_options(spec, ["clustertune", "clustertune-graphs", "clustertune-autotune"], [4])
    with pytest.raises(BenchError, match="choose from .*clustertune-graphs, clustertune-autotune"):
        check_options(spec, ["clustertune-cudagraphs"], [4])

    def row(variant: str, tok_s: float) -> dict:
        return {"variant": variant, "batch": 4, "tokens_per_s": tok_s, "mfu": None, "peak_mem_gb": None, "device": "CPU"}

    lines = report(spec, [row("clustertune", 1000.0), row("clustertune-graphs", 1500.0), row("clustertune-autotune", 900.0)])
    assert "ratio reduce-overhead / default compile (clustertune), batch 4: 1.50x (batch 4 vs 4)" in lines
    assert "ratio max-autotune-no-cudagraphs / default compile (clustertune), batch 4: 0.90x (batch 4 vs 4)" in lines
