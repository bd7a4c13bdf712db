"""The embedded default as the README runs it, at half its steps (tests/quickstart_fixture.py):
the one test that trains the real quickstart model, through the console script, not on a terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import cli, read_jsonl
from tests.quickstart_fixture import QuickstartRun


@pytest.mark.slow
def test_quickstart_perplexity_falls_at_least_5x(quickstart_cli_run: QuickstartRun) -> None:
    res, tmp_path = quickstart_cli_run.result, quickstart_cli_run.runs_root
    assert res.returncode == 0, res.stderr[-3000:]
    # Not a terminal: plain periodic progress lines instead of a bar.
    assert re.search(r"^step 10/100  loss [\d.]+ \| eval@0 perplexity [\d,.]+ \| tok/s [\d,.]+", res.stderr, re.M), \
        res.stderr[-2000:]
    assert re.search(r"^step 100/100 ", res.stderr, re.M)
    m = re.search(r"^run (\S+) COMPLETED\n  model:   (\S+)\n  metrics: (\S+)$", res.stdout, re.M)
    assert m, res.stdout
    run_dir = tmp_path / m.group(1)
    assert Path(m.group(2)) == run_dir / "model" and Path(m.group(3)) == run_dir / "metrics.jsonl"

    evals = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "eval"]
    assert [e["step"] for e in evals] == [0, 25, 50, 75, 100]  # a curve, not two points
    start, end = evals[0]["eval_perplexity"], evals[-1]["eval_perplexity"]
    assert start / end >= 5.0, (start, end)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 100 and summary["tokens_per_s"] > 0


@pytest.mark.slow
def test_quickstart_terminal_output_and_plot(quickstart_cli_run: QuickstartRun) -> None:
    """What the quickstart prints: checkpoint lines, the newest evaluation beside the training
    figures, no library warnings (they are in the run's log), the headline figure and the next
    commands; then `runs show --plot` draws its curves."""
    res, root = quickstart_cli_run.result, quickstart_cli_run.runs_root
    assert res.returncode == 0, res.stderr[-3000:]
    run_id = re.search(r"^run (\S+) COMPLETED$", res.stdout, re.M).group(1)
    for step in (25, 50, 75):
        assert re.search(rf"^checkpoint step-{step:08d} written \(", res.stderr, re.M), res.stderr[-3000:]
    # The log step at 50 comes before that step's evaluation; from step 60 on, the line shows it
    # (the loss, the newest evaluation, then the other figures).
    assert re.search(r"^step 50/100  loss [\d.]+ \| eval@25 perplexity [\d,.]+ \| .*  eta \d+:\d\d$", res.stderr, re.M), \
        res.stderr[-3000:]
    assert re.search(r"^step 60/100  loss [\d.]+ \| eval@50 perplexity [\d,.]+ \| .*  eta ", res.stderr, re.M), \
        res.stderr[-3000:]
    assert "Setting accelerator" not in res.stderr and "warn" not in res.stderr.lower(), res.stderr[-3000:]
    run_log = (root / run_id / "logs" / "run.log").read_text()
    # No library warns in the README's job: DeepSpeed is not imported (its import warning, kept off
    # the terminal, is tested in tests/unit/runs/test_library_logs.py), and GPT-2's unnamed loss is
    # named, so transformers has nothing to say about it.
    assert "WARNING" not in run_log and "loss_type" not in run_log
    m = re.search(r"^  eval:    perplexity ([\d,.]+) \(step 0\) -> ([\d,.]+) \(step 100\)$", res.stdout, re.M)
    assert m, res.stdout
    assert float(m.group(1).replace(",", "")) > 5 * float(m.group(2).replace(",", ""))
    assert f"  next:    clustertune runs show {run_id} --plot\n" in res.stdout
    assert f"clustertune generate {run_id} " in res.stdout

    show = cli("runs", "show", run_id, "--plot", "--runs-root", str(root))
    assert show.returncode == 0, show.stderr
    png = root / run_id / "curves.png"
    assert f"plot      {png}" in show.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
