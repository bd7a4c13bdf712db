"""Classification as run_glue.py users expect it, end to end on CPU: string labels from local
files (num_labels inferred, names in the model's config so pipelines print them), evaluation at
every epoch's end, and the user's own metric function beside the built-in ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import DataError, RecipeError
from clustertune.use.evaluate import evaluate_metrics
from tests.helpers import TINY_CLS, read_jsonl, with_

NAMES = {0: "prose", 1: "code"}  # sorted: code -> 0, prose -> 1


def _files(tmp: Path) -> tuple[Path, Path]:
    from clustertune.data.builtin import pydoc_kinds

    rows = [{"text": r["text"], "kind": NAMES[int(r["label"])]} for r in pydoc_kinds()][:160]
    train, val = tmp / "train.jsonl", tmp / "val.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows[:128]), encoding="utf-8")
    val.write_text("".join(json.dumps(r) + "\n" for r in rows[128:]), encoding="utf-8")
    return train, val


def string_label_recipe(tmp: Path, **train: object) -> dict:
    tr, va = _files(tmp)
    return with_(TINY_CLS, model={"num_labels": None},
                 data={"dataset": None, "train_files": [str(tr)], "validation_files": [str(va)], "label_column": "kind"},
                 train={"max_steps": None, "epochs": 2, "batch_size": 32, **train})


def test_string_labels_epoch_evals_and_a_users_metric(tmp_path: Path, runs_root: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import pipeline

    (tmp_path / "ct_cls_metric.py").write_text(
        "def share_code(predictions, labels):\n    return {'share_code': float((predictions == 0).mean())}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    recipe = ct.load_recipe(string_label_recipe(tmp_path, eval_every="epoch", metrics=["f1", "ct_cls_metric:share_code"]))
    run = ct.run(recipe, show_progress=False)
    assert run.state.value == "COMPLETED", run.info.reason

    cfg = json.loads((run.paths.model / "config.json").read_text())
    assert cfg["id2label"] == {"0": "code", "1": "prose"} and cfg["label2id"] == {"code": 0, "prose": 1}
    assert json.loads(run.paths.data.read_text())["labels"] == {"num_labels": 2, "names": ["code", "prose"]}

    # 128 rows / batch 32 = 4 steps per epoch: evaluations at the end of epoch 1 and of training.
    evals = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [4, 8]
    for r in evals:
        assert 0.0 <= r["eval_f1"] <= 1.0 and 0.0 <= r["eval_share_code"] <= 1.0 and "eval_accuracy" in r

    clf = pipeline("text-classification", model=str(run.paths.model), device="cpu")
    assert clf("for i in range(3): print(i)")[0]["label"] in ("code", "prose")

    # `clustertune eval` on the validation file maps its names through the model's config and
    # reproduces the final evaluation, the user's metric included.
    res = evaluate_metrics(run.id, data=str(tmp_path / "val.jsonl"), device="cpu", dtype="fp32")
    for key in ("eval_accuracy", "eval_f1", "eval_share_code"):
        assert res.metrics[key] == pytest.approx(evals[-1][key]), key


def test_bad_classification_inputs_stop_before_a_run_exists(tmp_path: Path, runs_root: Path) -> None:
    # Checked by the preflight, with every other problem of the recipe, before anything is read.
    with pytest.raises(RecipeError, match=r"train.metrics.0: cannot import module 'ct_absent_metrics'"):
        ct.run(ct.load_recipe(string_label_recipe(tmp_path, metrics=["ct_absent_metrics:f"])), show_progress=False)
    with pytest.raises(DataError, match=r"data.label_column: column 'label' not in the train data"):
        ct.run(ct.load_recipe(with_(string_label_recipe(tmp_path), data={"label_column": "label"})), show_progress=False)
    assert not runs_root.exists() or not any(runs_root.iterdir())
