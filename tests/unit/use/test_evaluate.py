"""``clustertune eval``'s own metrics, in process: the trainer's figures reproduced without
training, on the run's validation split or on any data a recipe can name, results written to
the run's evals/ and shown by ``runs show``; and the typed errors of what cannot be evaluated."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import EvalError, RecipeError
from clustertune.runs.report import show_text
from clustertune.use.evaluate import evaluate_metrics
from tests.helpers import read_jsonl
from tests.sft_fixtures import arithmetic_rows, sft_recipe, write_jsonl


def test_the_runs_own_validation_split_gives_the_trainers_figures(tiny_policy_run: ct.Run) -> None:
    final = [r for r in read_jsonl(tiny_policy_run.paths.metrics) if r["kind"] == "eval"][-1]
    res = evaluate_metrics(tiny_policy_run.id, runs_root=tiny_policy_run.paths.root.parent, device="cpu", dtype="fp32")
    assert res.metrics["eval_loss"] == pytest.approx(final["eval_loss"], rel=1e-5)
    assert res.metrics["eval_perplexity"] == pytest.approx(math.exp(final["eval_loss"]), rel=1e-4)
    assert res.payload["samples"] == 32  # the recipe's data.max_eval_samples
    assert res.path is not None and res.path.parent == tiny_policy_run.paths.evals
    assert json.loads(res.path.read_text())["metrics"] == res.metrics
    shown = show_text(tiny_policy_run)
    assert f"evals     {tiny_policy_run.paths.evals} (" in shown and "metrics: validation" in shown and "eval_loss" in shown


def test_a_classifier_gets_its_accuracy_and_lm_eval_is_refused(tiny_classifier_run: ct.Run) -> None:
    from clustertune.use.evaluate import evaluate_lm_eval

    root = tiny_classifier_run.paths.root.parent
    final = [r for r in read_jsonl(tiny_classifier_run.paths.metrics) if r["kind"] == "eval"][-1]
    res = evaluate_metrics(tiny_classifier_run.id, runs_root=root, device="cpu", dtype="fp32")
    assert res.metrics["eval_accuracy"] == pytest.approx(final["eval_accuracy"])
    assert res.metrics["eval_loss"] == pytest.approx(final["eval_loss"], rel=1e-5)
    with pytest.raises(EvalError, match="is a sequence classifier; lm-eval tasks evaluate language models"):
        evaluate_lm_eval(tiny_classifier_run.id, ["anything"], runs_root=root)


def test_other_data_a_file_or_a_builtin_with_overrides(tiny_policy_run: ct.Run, tmp_path: Path) -> None:
    from clustertune.data.builtin import pydoc_paragraphs

    text = tmp_path / "held_out.txt"
    text.write_text("\n".join(pydoc_paragraphs()[:40]), encoding="utf-8")
    on_file = evaluate_metrics(tiny_policy_run.id, data=str(text), runs_root=tiny_policy_run.paths.root.parent, device="cpu",
                               dtype="fp32", overrides=["data.max_eval_samples=5"])
    assert on_file.name == "held_out.txt" and on_file.payload["samples"] == 5
    assert math.isfinite(on_file.metrics["eval_perplexity"])
    # A model directory has no recipe: the data is named, and nothing is written anywhere.
    plain = evaluate_metrics(str(tiny_policy_run.paths.model), data="builtin:pydoc", device="cpu", dtype="fp32",
                             overrides=["data.block_size=64", "data.max_eval_samples=4"])
    assert plain.path is None and plain.payload["samples"] == 4 and plain.payload["task"] == "causal_lm"
    with pytest.raises(EvalError, match="a model directory has no recipe to take data from; name the data with --data"):
        evaluate_metrics(str(tiny_policy_run.paths.model), device="cpu")
    import clustertune.use.evaluate as evaluate_module

    with pytest.MonkeyPatch.context() as mp:  # a wrong --data is named before any weight is read
        mp.setattr(evaluate_module, "load_for_use", lambda *a, **k: pytest.fail("the model loaded before --data"))
        with pytest.raises(EvalError, match=r"--data .*missing.jsonl: no such file"):
            evaluate_metrics(tiny_policy_run.id, data=str(tmp_path / "missing.jsonl"),
                             runs_root=tiny_policy_run.paths.root.parent)
    with pytest.raises(RecipeError, match="data.max_eval_samplez"):
        evaluate_metrics(tiny_policy_run.id, runs_root=tiny_policy_run.paths.root.parent, overrides=["data.max_eval_samplez=3"])


@pytest.mark.parametrize("adapter", [False, True], ids=["full", "lora"])
def test_an_sft_run_gets_exact_match_and_loss(adapter: bool, sft_base: Path, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "chat.jsonl", arithmetic_rows(40))
    recipe = sft_recipe(sft_base, train, tmp_path / "runs", max_length=32)
    if adapter:  # loaded onto its base, unmerged, as training evaluated it
        recipe["model"]["adapter"] = {"type": "lora", "rank": 4}
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    final = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"][-1]
    res = evaluate_metrics(run.id, runs_root=tmp_path / "runs", device="cpu", dtype="fp32")
    assert res.metrics["eval_loss"] == pytest.approx(final["eval_loss"], rel=1e-5)
    assert res.metrics["eval_exact_match"] == pytest.approx(final["eval_exact_match"])
    assert "eval_contains" in res.metrics


def test_the_eval_command_prints_the_figures_without_library_noise(tiny_policy_run: ct.Run) -> None:
    from tests.helpers import cli

    done = cli("eval", tiny_policy_run.id, "--runs-root", str(tiny_policy_run.paths.root.parent), "--device", "cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "eval_perplexity" in done.stdout
    assert "Loading weights" not in done.stderr and "[transformers]" not in done.stderr, done.stderr[-2000:]
