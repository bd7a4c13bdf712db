"""What an in-process run checks before its run directory exists, so that a bad input leaves
nothing behind: the device setting, the strategy, the model config, the adapter, the metrics,
and the data itself (prepared into the cache here, a cache hit when it was prepared before).
It imports torch: the launcher's light in-process backend imports it only when it trains.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clustertune.data.cache import PreparedDataset, log_to_stderr
from clustertune.data.run_data import prepare_for_run
from clustertune.data.staging import read_run_data
from clustertune.errors import RunError, UserError
from clustertune.models.adapters import check_adapter, check_resume_recipe
from clustertune.models.build import check_sequence_fits, resolve_config
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run
from clustertune.train import checkpoint as ckpt
from clustertune.tasks.cls_metrics import metric_functions
from clustertune.train.precision import mixed_precision
from clustertune.runs.sealed import signed_state
from clustertune.train.strategies.zero import check_strategy


@dataclass
class TrainInputs:
    """What preflight learnt: the prepared data and the model config it checked (neither for
    RL runs, whose trainers load their own prompts and models)."""

    prepared: PreparedDataset | None
    config: Any


def use_device(recipe: Recipe) -> None:
    """``train.device: cpu`` in this process: the GPUs are hidden before CUDA starts, so every
    later device and precision decision sees none."""
    if recipe.train.device != "cpu":
        return
    if torch.cuda.is_initialized():
        raise UserError("train.device=cpu: CUDA has already started in this Python process; start it "
                        "with CUDA_VISIBLE_DEVICES='' or use `clustertune run`")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""


def preflight(recipe: Recipe, checked_before: bool = False) -> TrainInputs:
    """Checks that need data or a model config, and the data preparation itself (a cache hit
    when the same data was prepared before), done before any run directory exists.
    ``checked_before``: the recipe passed the api's preflight in this launch (a new run), which
    built the model on the meta device with its adapter and imported its metrics; only what needs
    this process (the device, the strategy's libraries) and the data are left. A resumed run's
    recipe did not pass it, and is checked whole here."""
    use_device(recipe)  # first: before anything can start CUDA
    check_strategy(recipe, mixed_precision(recipe))
    if recipe.traits.trainer == "trl":  # TRL's trainers load their own prompts/pairs; nothing to prepare here
        # Deferred: importing it pulls in accelerate, peft, tokenizers, transformers, which this module's importers do not need.
        from clustertune.train.rl import preflight_rl

        preflight_rl(recipe)
        return TrainInputs(prepared=None, config=None)
    if recipe.train.metrics and not checked_before:  # a metric function that does not import stops the run
        metric_functions(recipe.train.metrics, recipe.model.num_labels or 2)
    config = resolve_config(recipe, None)  # the run builds its model from it
    if not checked_before:
        check_sequence_fits(recipe, config)
        check_adapter(recipe, config)  # target modules exist, PEFT can wrap, bitsandbytes for QLoRA
    with log_to_stderr():
        prepared = prepare_for_run(recipe)
    return TrainInputs(prepared=prepared, config=config)


def _check_same_data(run: Run, prepared: PreparedDataset) -> None:
    """A resumed run must train on the data it started with."""
    if run.paths.data.is_file():
        before = read_run_data(run.paths).fingerprint
        if before != prepared.fingerprint:
            raise RunError(
                f"run {run.id} trained on prepared data {before}, but its recipe's data now gives "
                f"{prepared.fingerprint} (the source files or the tokenizer changed); start a new run instead of --resume"
            )


def get_ready(recipe: Recipe, resumed: Run | None, resume_from: Path | None) -> TrainInputs:
    """Everything that can fail on the user's input, before anything changes: that the
    checkpoint to resume from (its signature already accepted by the launcher) is whole and
    the recipe still fits it, the model config, the data (prepared here)."""
    if resume_from is not None:
        # Its files were checked against state.json by the launcher; here its tensor files open safely.
        state = signed_state(resume_from)
        if state.get("kind") != "trl":  # an RL checkpoint is the trainer's own directory
            ckpt.check_tensor_files(resume_from, list(state.get("files", {})))
        check_resume_recipe(resume_from, recipe)  # the same base and adapter settings
    checked = preflight(recipe, checked_before=resumed is None)  # a new run came through the api's preflight
    if resumed is not None and checked.prepared is not None:
        _check_same_data(resumed, checked.prepared)
    return checked
