"""End to end on CPU: both tasks train a tiny model through the public API, and the run
directory holds everything a user is promised (state, metrics, checkpoints, a reloadable model).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import clustertune as ct
from clustertune.runs import RunState
from tests.helpers import TINY_CAUSAL, TINY_CLS, read_jsonl, with_


def _reload_and_eval_loss(model_dir: Path, auto: type, block: torch.Tensor, **kwargs: torch.Tensor) -> float:
    model = auto.from_pretrained(str(model_dir))
    model.eval()
    with torch.no_grad():
        return float(model(input_ids=block, **kwargs).loss)


@pytest.mark.smoke  # one end-to-end check of this backend in `scripts/test.sh --fast`
def test_causal_lm_run_directory_and_reloadable_model(runs_root: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    recipe = ct.load_recipe(with_(TINY_CAUSAL, train={"save_every": 6, "keep_last": 1}))
    run = ct.run(recipe, show_progress=False)

    assert run.state is RunState.COMPLETED
    info = json.loads(run.paths.run_json.read_text())
    assert info["state"] == "COMPLETED" and len(info["attempts"]) == 1
    assert info["attempts"][0]["state"] == "COMPLETED" and info["attempts"][0]["ended_at"]
    assert ct.load_recipe(run.paths.recipe) == recipe  # the resolved recipe round-trips

    rows = read_jsonl(run.paths.metrics)
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in train] == [4, 8, 12]
    assert [r["step"] for r in evals] == [0, 12]
    for r in train:
        assert math.isfinite(r["loss"]) and r["tokens_per_s"] > 0 and r["lr"] >= 0 and r["grad_norm"] > 0
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert evals[-1]["eval_perplexity"] == pytest.approx(math.exp(evals[-1]["eval_loss"]), rel=1e-6)

    # keep_last=1: only the newest checkpoint (step 6) is kept, and it is complete.
    ckpts = sorted(p.name for p in run.paths.checkpoints.iterdir())
    assert ckpts == ["step-00000006"]
    assert (run.paths.checkpoints / ckpts[0] / "state.json").is_file()

    # The final model and tokenizer reload with plain transformers and give the logged loss.
    tok = AutoTokenizer.from_pretrained(str(run.paths.model))
    ids = torch.tensor([tok("def f(x):\n    return x + 1\n" * 4)["input_ids"][:64]])
    loss = _reload_and_eval_loss(run.paths.model, AutoModelForCausalLM, ids, labels=ids)
    assert math.isfinite(loss)
    summary = json.loads(run.paths.summary.read_text())
    assert summary["steps"] == 12 and summary["final_eval"]["eval_loss"] == pytest.approx(evals[-1]["eval_loss"])

    # What the run's log shows a person of a one-process run: its eval, checkpoint and end lines,
    # and not the per-rank memory line (it is for several ranks; the metrics row has it) nor a
    # "done" line that repeats where the model is (the summary below it says so).
    log = run.paths.log.read_text()
    assert "eval @ step 0:" in log and "checkpoint step-00000006" in log and "done at step 12" in log
    assert "state held per rank" not in log and "done. model" not in log and str(run.paths.model) not in log
    assert any(r["kind"] == "state_memory" for r in rows)

    # Lookup by id and listing see the same run.
    assert ct.get_run(run.id).state is RunState.COMPLETED
    assert [r.id for r in ct.list_runs()] == [run.id]


def test_sequence_classification_reports_accuracy_and_reloads(runs_root: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    recipe = with_(TINY_CLS, train={"max_steps": 40, "warmup_steps": 5, "eval_every": 20, "eval_at_start": True})
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED
    evals = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 20, 40]
    # Balanced classes: chance is 0.5. The builtin prose-vs-code labels carry a real signal.
    assert 0.3 < evals[0]["eval_accuracy"] < 0.7
    assert evals[-1]["eval_accuracy"] >= 0.8, evals

    model = AutoModelForSequenceClassification.from_pretrained(str(run.paths.model))
    assert model.config.num_labels == 2
    tok = AutoTokenizer.from_pretrained(str(run.paths.model))
    enc = tok(["for i in range(10): print(i)"], return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    assert logits.shape == (1, 2)
    # The tokenizer frames examples like BERT's: <cls> ... <sep>.
    assert enc["input_ids"][0, 0].item() == tok.cls_token_id and enc["input_ids"][0, -1].item() == tok.sep_token_id


def test_local_files_and_gradient_accumulation(runs_root: Path, tmp_path: Path) -> None:
    """Local jsonl files for train and validation; accumulation multiplies the samples per step."""
    from clustertune.data.builtin import pydoc_paragraphs

    paras = pydoc_paragraphs()
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"body": p}) + "\n" for p in paras[:600]))
    (tmp_path / "val.jsonl").write_text("".join(json.dumps({"body": p}) + "\n" for p in paras[600:700]))
    recipe = with_(
        TINY_CAUSAL,
        data={"dataset": None, "train_files": [str(tmp_path / "train.jsonl")],
              "validation_files": [str(tmp_path / "val.jsonl")], "text_column": "body", "block_size": 32},
        train={"gradient_accumulation_steps": 3, "max_steps": 4, "log_every": 2, "eval_at_start": False},
    )
    run = ct.run(recipe, show_progress=False)
    train = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert [r["samples_seen"] for r in train] == [2 * 8 * 3, 4 * 8 * 3]


def test_tensorboard_event_files_are_written(runs_root: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = ct.run(ct.load_recipe(with_(TINY_CAUSAL, train={"max_steps": 8}, tracking={"trackers": ["tensorboard"]})),
                 show_progress=False)
    events = list(run.paths.trackers.rglob("events.out.tfevents.*"))
    assert events, f"no event files under {run.paths.trackers}"
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "train/loss" in tags and "eval/eval_loss" in tags
    assert [e.step for e in acc.Scalars("train/loss")] == [4, 8]


def test_failure_after_the_run_started_is_recorded(runs_root: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure once the run exists leaves it FAILED with the reason, and re-raises."""
    # A metric function that imports (so the preflight passes it) and breaks when the first
    # evaluation calls it: only the running loop finds that out.
    (tmp_path / "ct_breaking_metric.py").write_text("def f(preds, labels):\n    raise ValueError('metric broke')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    bad = with_(TINY_CLS, train={"metrics": ["ct_breaking_metric:f"], "max_steps": 2})
    with pytest.raises(Exception, match="metric broke"):
        ct.run(ct.load_recipe(bad), show_progress=False)
    (run,) = ct.list_runs()
    assert run.state is RunState.FAILED
    att = run.attempts[-1]
    assert att.state == "FAILED" and "metric broke" in att.reason and att.ended_at
