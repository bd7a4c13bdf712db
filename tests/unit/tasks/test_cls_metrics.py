"""Classification metrics: the built-in ones against hand-computed values, the user's own by
module:function, and the typed errors of functions that cannot be used."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from clustertune.errors import MetricError, RecipeError
from clustertune.recipe.load import load_recipe
from clustertune.tasks.cls_metrics import compute, matthews_correlation, metric_functions
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


class _ThreadRank:
    """One rank of a world of threads: ``reduce`` sums over the ranks as an all-reduce does."""

    def __init__(self, rank: int, world: int, shared: dict, barrier: object):
        import contextlib

        import torch

        self.process_index, self.num_processes, self.device = rank, world, torch.device("cpu")
        self.shared, self.barrier = shared, barrier
        self.autocast = contextlib.nullcontext

    def reduce(self, tensor, reduction: str = "sum"):  # noqa: ANN001, ANN201
        self.shared[self.process_index] = tensor.clone()
        self.barrier.wait()
        total = sum(self.shared[r] for r in range(self.num_processes))
        self.barrier.wait()  # every rank has read before the next reduce writes
        return total


def test_metrics_see_every_sample_in_order_whatever_the_world_size() -> None:
    import threading

    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from clustertune.data.prepare import Arrays
    from clustertune.train.loop import evaluate
    from clustertune.use.evaluate import LocalStrategy

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64, num_labels=3)).eval()
    n = 13  # neither the batch size nor the world size divides it
    rng = np.random.default_rng(0)
    arrays = Arrays(input_ids=rng.integers(1, 50, (n, 8)), attention_mask=np.ones((n, 8), dtype=np.uint8),
                    labels=rng.integers(0, 3, n))
    seen: list[tuple[list[int], list[int]]] = []

    def order(predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        seen.append((predictions.tolist(), labels.tolist()))
        return {"n": float(len(labels))}

    fns = [order, *metric_functions(["f1"], 3)]
    one = evaluate(model, arrays, "sequence_classification", 4, LocalStrategy("cpu"), fns)
    world, shared, barrier = 3, {}, threading.Barrier(3)
    results: dict[int, dict[str, float]] = {}

    def rank(r: int) -> None:
        results[r] = evaluate(model, arrays, "sequence_classification", 4, _ThreadRank(r, world, shared, barrier), fns)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0][1] == arrays.labels.tolist() and all(s == seen[0] for s in seen[1:])  # same samples, same order
    for r in range(world):
        assert results[r]["eval_n"] == n and results[r]["eval_f1"] == pytest.approx(one["eval_f1"])
        assert results[r]["eval_accuracy"] == pytest.approx(one["eval_accuracy"])
        assert results[r]["eval_loss"] == pytest.approx(one["eval_loss"], rel=1e-5)
