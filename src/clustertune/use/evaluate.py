"""``clustertune eval``: a trained model's own metrics on any data a recipe can name, no training.

The metrics are the ones the trainer logs, computed by the trainer's own code
(:func:`clustertune.train.loop.evaluate`, the SFT generation check, ``train.metrics``): eval loss
and perplexity for a causal LM, loss, accuracy and the recipe's metrics for a classifier, loss,
perplexity, exact match and contains for SFT. The data is prepared as training prepares it (the
same cache, the model's own tokenizer): by default the run's own validation split, through its
recipe; ``--data`` names another source the way ``data.dataset`` does (``builtin:...``, a
``save_to_disk`` directory, a hub name) or a local file (.txt/.jsonl/.csv/.parquet: all of it is
evaluated). ``key=value`` overrides change the recipe's data settings (``data.text_column=body``,
``data.max_eval_samples=200``). A run's results go to ``evals/`` in its directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import EvalError
from clustertune.recipe.load import load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.use.load import Loaded, Target, find_target, load_for_use
from clustertune.runs.evals import write_eval
from clustertune.use.lm_eval_bridge import check_tasks, run_tasks
from clustertune.runs.paths import has_tokenizer
from clustertune.tasks import find_task, task_of

log = logging.getLogger("clustertune")

FILE_SUFFIXES = (".txt", ".json", ".jsonl", ".csv", ".parquet")


@dataclass
class EvalResult:
    """What one evaluation measured, and where it was written (None: not written)."""

    target: Target
    kind: str
    name: str
    metrics: dict[str, float]
    payload: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


class LocalStrategy:
    """The one-process, one-device view of a strategy that the trainer's evaluation code asks for."""

    process_index = 0
    num_processes = 1

    def __init__(self, device: str):
        import torch

        self.device = torch.device(device)

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # the weights are already in the dtype asked for

    def reduce(self, tensor: Any, reduction: str = "sum") -> Any:
        return tensor

    def unwrap(self, model: Any) -> Any:
        return model


def _is_file_source(data: str) -> bool:
    p = Path(data).expanduser()
    return p.is_file() or (Path(data).suffix.lower() in FILE_SUFFIXES and not p.is_dir())


def check_data_arg(data: str | None) -> None:
    """``--data`` written as a file that is not there."""
    if data is not None and _is_file_source(data) and not Path(data).expanduser().is_file():
        raise EvalError(f"--data {data}: no such file; give a local .txt/.jsonl/.csv/.parquet file, "
                        "a save_to_disk directory, builtin:NAME or a hub dataset name")


def _label_names(model_config: Any) -> list[str] | None:
    """The classifier's class names, unless they are transformers' placeholders (LABEL_0...)."""
    id2label = {int(k): str(v) for k, v in (getattr(model_config, "id2label", None) or {}).items()}
    names = [id2label[i] for i in sorted(id2label)]
    return None if not names or names == [f"LABEL_{i}" for i in range(len(names))] else names


def eval_recipe(target: Target, data: str | None, overrides: list[str], model_config: Any,
                tokenizer_dir: Path) -> Recipe:
    """The recipe whose validation split is the data to evaluate on: the run's own (its data
    section), or ``data``; the model section names the model and its tokenizer."""
    if target.run is not None:
        base = load_recipe(target.run.paths.recipe).to_plain()
        if (found := find_task(str(base.get("task")))) is not None and found.trained_by_trl:
            raise EvalError(f"{target.label} is an RLHF run: its rewards are measured during training; "
                            "evaluate its policy with lm-eval tasks (--tasks TASK)")
    elif data is None:
        raise EvalError(f"{target.path}: a model directory has no recipe to take data from; name the data "
                        "with --data (builtin:pydoc, a file, a save_to_disk directory or a hub dataset)")
    else:
        base = {"name": target.path.name, "task": "sequence_classification" if target.classifier else "causal_lm"}
    base["launch"], base["tracking"], base["rl"] = {}, {}, None
    task = task_of(base["task"])
    model: dict[str, Any] = {"name_or_path": str(target.path), "tokenizer": str(tokenizer_dir)}
    d = dict(base.get("data") or {})
    if task.predicts_labels:
        names = _label_names(model_config)
        model["num_labels"] = None if names else int(getattr(model_config, "num_labels", 2))
        d["label_names"] = names
    base["model"] = model
    if data is not None:
        for key in ("dataset", "dataset_config", "dataset_revision"):
            d[key] = None
        d["train_files"], d["validation_files"], d["streaming"] = [], [], False
        if _is_file_source(data):
            check_data_arg(data)
            # The whole file is the evaluation set (the training side gets the same file: it
            # is prepared but never read).
            d["train_files"] = d["validation_files"] = [str(Path(data).expanduser())]
        else:
            d["dataset"] = data
    base["data"] = d
    train = dict(base.get("train") or {})
    train["eval_every"] = None
    base["train"] = train
    return load_recipe(base, overrides)


def _data_name(recipe: Recipe, data: str | None) -> str:
    if data is None:
        return "validation"
    return Path(data).name if _is_file_source(data) else data


def evaluate_metrics(ref: str, *, data: str | None = None, overrides: list[str] | None = None,
                     runs_root: str | os.PathLike[str] | None = None, device: str | None = None,
                     dtype: str = "auto", batch_size: int | None = None, write: bool = True) -> EvalResult:
    """The model's own metrics on ``data`` (default: the run's validation split)."""
    # Deferred: importing it pulls in numpy, which this module's importers do not need.
    from clustertune.data.cache import log_to_stderr, prepare
    # Deferred: importing it pulls in numpy, which this module's importers do not need.
    from clustertune.tasks.cls_metrics import metric_functions
    # Deferred: importing it pulls in numpy, torch, which this module's importers do not need.
    from clustertune.train.loop import evaluate
    # Deferred: importing it pulls in numpy, torch, which this module's importers do not need.
    from clustertune.train.sft_eval import make_generation_check
    # Deferred: importing it pulls in torch, which this module's importers do not need.
    from clustertune.train.sft_loss import TrainedPositions

    target = find_target(ref, runs_root)
    tokenizer_dir = _tokenizer_dir(target)
    check_data_arg(data)  # before the model is read: a wrong path costs no load
    loaded = load_for_use(ref, runs_root=runs_root, device=device, dtype=dtype)
    cfg = loaded.model.config
    recipe = eval_recipe(target, data, list(overrides or []), cfg, tokenizer_dir)
    with log_to_stderr():
        prepared = prepare(recipe)
    arrays = prepared.open_split("validation")
    strategy = LocalStrategy(loaded.device)
    fns = metric_functions(recipe.train.metrics, int(getattr(cfg, "num_labels", 2))) \
        if task_of(recipe.task).predicts_labels else []
    t0 = time.perf_counter()
    bs = batch_size or recipe.train.eval_batch_size or recipe.train.batch_size
    # SFT: logits for the trained positions only, as in training (same loss, less work).
    kept = TrainedPositions(loaded.model) if task_of(recipe.task).loss_on_trained_tokens else None
    try:
        metrics = evaluate(loaded.model, arrays, recipe.task, bs, strategy, fns, kept)
    finally:
        if kept is not None:
            kept.remove()
    check = make_generation_check(recipe, arrays, prepared.tokenizer_dir, strategy)
    if check is not None:
        metrics.update(check(loaded.model))
    loaded.model.eval()  # the trainer's evaluate leaves a model in training mode
    seconds = time.perf_counter() - t0
    name = _data_name(recipe, data)
    payload = {
        "kind": "metrics", "name": name, "model": loaded.target.label, "task": recipe.task,
        "data": data or "the run's validation split", "overrides": list(overrides or []),
        "fingerprint": prepared.fingerprint, "samples": len(arrays), "device": loaded.device,
        "dtype": str(getattr(loaded.model, "dtype", dtype)).removeprefix("torch."),
        "seconds": round(seconds, 3), "metrics": metrics,
    }
    return _finish(loaded, "metrics", name, metrics, payload, write)


def _tokenizer_dir(target: Target) -> Path:
    for where in (target.path, target.run.paths.tokenizer if target.run is not None else None):
        if where is not None and has_tokenizer(where):
            return where
    raise EvalError(f"{target.label}: no saved tokenizer in {target.path} to prepare the data with; "
                    "save one there with tokenizer.save_pretrained(DIR)")


def evaluate_lm_eval(ref: str, tasks: list[str], *, include_path: str | None = None, limit: float | None = None,
                     num_fewshot: int | None = None, runs_root: str | os.PathLike[str] | None = None,
                     device: str | None = None, dtype: str = "auto", batch_size: int | None = None,
                     write: bool = True) -> EvalResult:
    """Tasks of EleutherAI's lm-eval harness on the model (an adapter merged onto its base)."""

    target = find_target(ref, runs_root)
    if target.classifier:
        raise EvalError(f"{target.label} is a sequence classifier; lm-eval tasks evaluate language models "
                        "(use `clustertune eval` without --tasks for its accuracy)")
    manager = check_tasks(tasks, include_path)  # before loading the model: a typo costs no load
    loaded = load_for_use(ref, runs_root=runs_root, device=device, dtype=dtype, merge=True)
    result = run_tasks(loaded, tasks, manager, limit=limit, num_fewshot=num_fewshot, batch_size=batch_size or 1)
    name = "lm-eval-" + "+".join(tasks)
    payload = {"kind": "lm-eval", "name": name, "model": loaded.target.label, "tasks": tasks,
               "include_path": include_path, "limit": limit, "num_fewshot": num_fewshot,
               "device": loaded.device, **result}
    return _finish(loaded, "lm-eval", name, result["metrics"], payload, write)


def _finish(loaded: Loaded, kind: str, name: str, metrics: dict[str, float], payload: dict[str, Any],
            write: bool) -> EvalResult:
    res = EvalResult(loaded.target, kind, name, metrics, payload)
    if write and loaded.target.run is not None:
        res.path = write_eval(loaded.target.run.paths.evals, payload)
    return res
