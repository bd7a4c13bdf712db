"""Classification metrics from predictions and labels: the built-in ones and the user's own.

``train.metrics`` names them: built-in names (:data:`~clustertune.recipe.schema.BUILTIN_METRICS`)
or ``module:function``. A user's function is called as ``fn(predictions, labels)`` with integer
numpy arrays over the whole evaluation set, in the data's order, and returns a float or a dict of
floats; every value is logged as ``eval_<name>``. Accuracy is always computed by the loop itself.

``f1``, ``precision`` and ``recall`` are those of class 1 with two classes (what GLUE reports
and scikit-learn computes by default), macro averages with more; ``f1_macro`` always averages.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from clustertune.errors import MetricError
from clustertune.runs.user_code import import_function, user_traceback

MetricFn = Callable[[np.ndarray, np.ndarray], dict[str, float]]


def _per_class(pred: np.ndarray, ref: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 of every class (0 where a class was never predicted or seen)."""
    cm = np.zeros((n, n), dtype=np.int64)
    np.add.at(cm, (ref, pred), 1)
    tp = np.diag(cm).astype(float)
    predicted, actual = cm.sum(0).astype(float), cm.sum(1).astype(float)
    precision = np.divide(tp, predicted, out=np.zeros(n), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros(n), where=actual > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros(n), where=denom > 0)
    return precision, recall, f1


def _classes(pred: np.ndarray, ref: np.ndarray, num_labels: int) -> int:
    return max(num_labels, int(max(pred.max(initial=0), ref.max(initial=0))) + 1)


def _pick(values: np.ndarray, n: int, average: bool) -> float:
    return float(values.mean()) if average or n != 2 else float(values[1])


def matthews_correlation(pred: np.ndarray, ref: np.ndarray, n: int) -> float:
    """Matthews' correlation coefficient, multi-class form (Gorodkin's R_K)."""
    cm = np.zeros((n, n), dtype=np.float64)
    np.add.at(cm, (ref, pred), 1)
    t, p, c, s = cm.sum(1), cm.sum(0), np.trace(cm), cm.sum()
    denom = math.sqrt(max(s * s - float(p @ p), 0.0)) * math.sqrt(max(s * s - float(t @ t), 0.0))
    return float((c * s - float(t @ p)) / denom) if denom > 0 else 0.0


def builtin_metric(name: str, num_labels: int) -> MetricFn:
    def fn(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
        n = _classes(pred, ref, num_labels)
        if name == "accuracy":
            return {"accuracy": float((pred == ref).mean()) if len(ref) else 0.0}
        if name == "matthews_correlation":
            return {name: matthews_correlation(pred, ref, n)}
        precision, recall, f1 = _per_class(pred, ref, n)
        if name == "f1_macro":
            return {name: float(f1.mean())}
        return {name: _pick({"f1": f1, "precision": precision, "recall": recall}[name], n, False)}
    return fn


def _user_metric(spec: str, key: str) -> MetricFn:
    fn = import_function(spec, key, "metric function", MetricError)
    attr = spec.rsplit(":", 1)[1]

    def call(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
        try:
            out = fn(pred, ref)
        except Exception as exc:
            raise MetricError(f"{key}: metric function {spec} raised:\n{user_traceback(exc)}") from exc
        values: dict[str, Any] = out if isinstance(out, dict) else {attr: out}
        checked = {}
        for k, v in values.items():
            if isinstance(v, bool) or not hasattr(v, "__float__") or not isinstance(k, str):
                raise MetricError(f"{key}: metric function {spec} returned {k!r}: {v!r} ({type(v).__name__}); "
                                  "it must return a float or a dict of name -> float")
            checked[k.removeprefix("eval_")] = float(v)
        return checked
    return call


def metric_functions(names: list[str] | tuple[str, ...], num_labels: int) -> list[MetricFn]:
    """The functions ``train.metrics`` names, imported now (an import error stops the run
    before it trains)."""
    return [_user_metric(n, f"train.metrics.{i}") if ":" in n else builtin_metric(n, num_labels)
            for i, n in enumerate(names)]


def compute(fns: list[MetricFn], predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """``eval_<name>`` of every metric on the whole evaluation set."""
    out: dict[str, float] = {}
    for fn in fns:
        out.update({f"eval_{k}": v for k, v in fn(predictions, labels).items()})
    return out
