"""The embedded default, exactly as the README runs it: the one test that trains the real
quickstart model (a few minutes on 2 cores), through the console script, not on a terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import read_jsonl
from tests.quickstart_fixture import QuickstartRun


@pytest.mark.slow
def test_quickstart_perplexity_falls_at_least_5x(quickstart_cli_run: QuickstartRun) -> None:
    res, tmp_path = quickstart_cli_run.result, quickstart_cli_run.runs_root
    assert res.returncode == 0, res.stderr[-3000:]
    # Not a terminal: plain periodic progress lines instead of a bar.
    assert re.search(r"^step 10/200  loss [\d.]+  tok/s [\d,.]+", res.stderr, re.M), res.stderr[-2000:]
    assert re.search(r"^step 200/200 ", res.stderr, re.M)
    m = re.search(r"^run (\S+) COMPLETED\n  model:   (\S+)\n  metrics: (\S+)$", res.stdout, re.M)
    assert m, res.stdout
    run_dir = tmp_path / m.group(1)
    assert Path(m.group(2)) == run_dir / "model" and Path(m.group(3)) == run_dir / "metrics.jsonl"

    evals = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "eval"]
    assert [e["step"] for e in evals] == [0, 200]
    start, end = evals[0]["eval_perplexity"], evals[-1]["eval_perplexity"]
    assert start / end >= 5.0, (start, end)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 200 and summary["tokens_per_s"] > 0
