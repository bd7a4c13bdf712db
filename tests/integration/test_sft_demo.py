"""The shipped SFT demo learns its task: LoRA on the session's one quickstart model lifts the
held-out exact match from near 0 (the untuned baseline, evaluated at step 0) to at least 0.5,
and the run's closing lines report both. The suite's one longer SFT test (about a minute and a
half on 2 idle cores, after the shared quickstart run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustertune.runs.store import list_runs
from tests.helpers import cli, read_jsonl
from tests.quickstart_fixture import QuickstartRun


@pytest.mark.slow
def test_the_sft_demo_lifts_held_out_exact_match_from_near_0_to_at_least_half(
        quickstart_cli_run: QuickstartRun, tmp_path: Path) -> None:
    assert quickstart_cli_run.result.returncode == 0, quickstart_cli_run.result.stderr[-2000:]
    base = next(r for r in list_runs(quickstart_cli_run.runs_root) if r.info.name == "quickstart").paths.model
    # Its own runs root: the quickstart's is shared with tests that take its newest run.
    res = cli("run", "sft-demo", f"model.name_or_path={base}", "--runs-root", str(tmp_path), "--no-progress",
              timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = list_runs(tmp_path)
    evals = [m for m in read_jsonl(run.paths.metrics) if m["kind"] == "eval"]
    first, last = evals[0], evals[-1]
    assert first["step"] == 0 and first["eval_exact_match"] <= 0.1, first
    assert last["step"] == 250 and last["eval_exact_match"] >= 0.5, last
    assert f"held-out exact match {first['eval_exact_match']:.2f} (step 0) -> {last['eval_exact_match']:.2f} (step 250)" \
        in res.stdout, res.stdout[-2000:]
    # What it keeps is the adapter (loaded onto the quickstart model by generate, chat, export).
    assert (run.paths.model / "adapter_config.json").is_file()
