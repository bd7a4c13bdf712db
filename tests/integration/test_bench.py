"""`clustertune bench` end to end on CPU with a tiny model, and its bad options."""

from __future__ import annotations

import re

import pytest

from tests.helpers import cli


@pytest.mark.slow
def test_bench_runs_every_variant_side_by_side_and_prints_ratios() -> None:
    out = cli("bench", "--size", "tiny", "--layers", "1", "--steps", "5", "--skip", "2", timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    table = {m.group(1): float(m.group(2).replace(",", ""))
             for m in re.finditer(r"^(clustertune|clustertune-eager|trainer|trainer-compile)\s+8\s+([\d,]+)\s",
                                  out.stdout, re.M)}
    assert set(table) == {"clustertune", "clustertune-eager", "trainer", "trainer-compile"}, out.stdout
    assert all(v > 0 for v in table.values())
    ratios = dict(re.findall(r"^ratio (.+?): ([\d.]+)x", out.stdout, re.M))
    want = table["clustertune"] / table["trainer"]
    got = float(ratios["clustertune / Trainer default, batch 8"])
    assert abs(got - want) <= 0.01 * want + 0.005  # the printed ratio is the ratio of the printed figures
    assert "compiled / eager (clustertune), batch 8" in ratios


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--variants", "clustertune,bogus"], "--variants: unknown bogus"),
     (["--batch", "8,x"], "--batch: '8,x' is not a comma-separated list")],
)
def test_bad_bench_options_exit_2_with_the_option_named(args: list[str], words: str) -> None:
    out = cli("bench", "--size", "tiny", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert words in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("change", "batches", "words"),
    [({}, [0], "--batch: batch sizes must be positive"),
     ({"steps": 3, "skip": 3}, [8], "--steps (3) must be larger than --skip (3)"),
     ({"skip": 0}, [8], "--skip: at least 1 warm-up step"),
     ({"heads": 3}, [8], "--width (64) must be a multiple of --heads (3)")],
)
def test_bad_bench_specs_name_the_option(change: dict, batches: list[int], words: str) -> None:
    from dataclasses import replace

    from clustertune.train.bench import BenchError, BenchSpec, check_options

    spec = replace(BenchSpec.preset("tiny"), **change)
    with pytest.raises(BenchError) as err:
        check_options(spec, ["clustertune"], batches)
    assert words in str(err.value)
