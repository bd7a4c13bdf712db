"""The session's quickstart run, exported as the README shows: the directory generates the
run's own greedy tokens through transformers.pipeline, and its card carries the run's figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from clustertune.cli.main import main
from tests.quickstart_fixture import QuickstartRun


@pytest.mark.slow
def test_the_quickstart_run_exports_to_a_pipeline_that_generates_its_tokens(
        quickstart_cli_run: QuickstartRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    assert quickstart_cli_run.result.returncode == 0, quickstart_cli_run.result.stderr[-3000:]
    run_id = re.search(r"^run (\S+) COMPLETED$", quickstart_cli_run.result.stdout, re.M).group(1)  # type: ignore[union-attr]
    run_dir = quickstart_cli_run.runs_root / run_id
    out = tmp_path / "quickstart-model"
    assert main(["export", run_id, "--to", str(out), "--runs-root", str(quickstart_cli_run.runs_root)]) == 0
    assert f"exported  run {run_id} as a model (float32)" in capsys.readouterr().out

    tok = AutoTokenizer.from_pretrained(str(out))
    ids = tok("The for statement", return_tensors="pt").input_ids
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(str(run_dir / "model")).generate(
            ids, max_new_tokens=16, do_sample=False, pad_token_id=tok.pad_token_id)[0].tolist()
    got = pipeline("text-generation", model=str(out))("The for statement", max_new_tokens=16, do_sample=False,
                                                      return_tensors=True)[0]["generated_token_ids"]
    assert list(got) == want[: len(got)] and len(got) > ids.shape[1]
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["eos_token_id"] == tok.eos_token_id and gen["eos_token_id"] < len(tok)  # not GPT-2's 50256

    summary = json.loads((run_dir / "summary.json").read_text())
    card = (out / "README.md").read_text()
    assert f"eval_perplexity {summary['final_eval']['eval_perplexity']:.4g}" in card
    assert "built from the `gpt2` config" in card and "data: `builtin:pydoc`" in card
