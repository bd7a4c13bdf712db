"""Classification metrics: the built-in ones against hand-computed values, the user's own by
module:function, and the typed errors of functions that cannot be used."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from clustertune.errors import MetricError, RecipeError
from clustertune.recipe.load import load_recipe
from clustertune.train.cls_metrics import compute, matthews_correlation, metric_functions
from tests.helpers import TINY_CLS, with_

PRED = np.array([1, 1, 0, 1, 0, 0, 1, 0])
REF = np.array([1, 0, 0, 1, 1, 0, 1, 0])  # tp 3, fp 1, fn 1, tn 3


def test_builtin_metrics_match_hand_computed_values() -> None:
    out = compute(metric_functions(["accuracy", "f1", "precision", "recall", "f1_macro", "matthews_correlation"], 2),
                  PRED, REF)
    assert out["eval_accuracy"] == pytest.approx(6 / 8)
    assert out["eval_f1"] == out["eval_precision"] == out["eval_recall"] == pytest.approx(3 / 4)
    assert out["eval_f1_macro"] == pytest.approx(3 / 4)  # both classes 3/4 here
    assert out["eval_matthews_correlation"] == pytest.approx((3 * 3 - 1 * 1) / 16)
    # Three classes: f1 is the macro average; a perfect prediction has correlation 1.
    three = compute(metric_functions(["f1"], 3), np.array([0, 1, 2, 2]), np.array([0, 1, 2, 1]))
    assert three["eval_f1"] == pytest.approx(np.mean([1.0, 2 / 3, 2 / 3]))
    assert matthews_correlation(REF, REF, 2) == pytest.approx(1.0)


def test_a_users_function_gets_predictions_and_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ct_metrics_ok.py").write_text(
        "def errors(predictions, labels):\n    return float((predictions != labels).sum())\n"
        "def both(predictions, labels):\n    return {'n': len(labels), 'eval_first': int(predictions[0])}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    out = compute(metric_functions(["ct_metrics_ok:errors", "ct_metrics_ok:both"], 2), PRED, REF)
    assert out == {"eval_errors": 2.0, "eval_n": 8.0, "eval_first": 1.0}


def test_metric_functions_that_cannot_be_used_are_typed_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ct_metrics_bad.py").write_text(
        "def text(predictions, labels):\n    return 'high'\n"
        "def boom(predictions, labels):\n    raise ValueError('no labels here')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(MetricError, match=r"train.metrics.0: cannot import module 'ct_no_such_module'"):
        metric_functions(["ct_no_such_module:f"], 2)
    with pytest.raises(MetricError, match=r"train.metrics.1: module 'ct_metrics_bad' has no attribute 'nope'; its callables are boom, text"):
        metric_functions(["f1", "ct_metrics_bad:nope"], 2)
    with pytest.raises(MetricError, match=r"returned 'text': 'high' \(str\); it must return a float"):
        compute(metric_functions(["ct_metrics_bad:text"], 2), PRED, REF)
    with pytest.raises(MetricError, match=r"ct_metrics_bad:boom raised:(.|\n)*ValueError: no labels here"):
        compute(metric_functions(["ct_metrics_bad:boom"], 2), PRED, REF)
    with pytest.raises(RecipeError, match="train.metrics.0: unknown metric 'acc': use one of accuracy"):
        load_recipe(with_(TINY_CLS, train={"metrics": ["acc"]}))
    with pytest.raises(RecipeError, match="train.metrics: only for task sequence_classification"):
        load_recipe(with_(TINY_CLS, task="causal_lm", train={"metrics": ["f1"]}))
