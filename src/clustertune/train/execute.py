"""What one rank does to train: tokenizer, model, data arrays, Accelerator, the loop, the final
model. Everything it needs is in the run directory (the resolved recipe) plus the checkpoint to
resume from; the submitting side has already checked the inputs. :mod:`clustertune.train.attempt`
wraps it in the attempt's lifecycle (log, stop requests, the run's end state).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from clustertune.data.staging import open_run_data, read_run_data
from clustertune.errors import DataError
from clustertune.fsutil import atomic_write_json
from clustertune.models.adapters import merge_adapter
from clustertune.models.build import build_model, resolve_config
from clustertune.models.saving import save_pretrained
from clustertune.recipe.load import dump_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths
from clustertune.train import held_state
from clustertune.train.host_malloc import keep_freed_memory
from clustertune.recipe.ds_config import with_deepspeed_json
from clustertune.train.throughput import parameter_count
from clustertune.train import first_batches
from clustertune.train.loop import LoopResult, forward, train_loop
from clustertune.train.fastpath import pad_vocab, vocab_multiple
from clustertune.data.templates import set_generation_ids
from clustertune.train.metrics import log_final, start_trackers, tracker_env
from clustertune.train.fp8 import check_fp8_device, to_fp8
from clustertune.train.precision import mixed_precision, precision_name, reset_accelerate_state
from clustertune.train.strategies import Strategy
from clustertune.train.strategies.accel import AccelerateStrategy, fsdp_plugin, loads_from_rank0
from clustertune.train.strategies.base import explain_out_of_memory
from clustertune.train.strategies.group import fp32_matmul_precision, start_process_group
from clustertune.train.strategies.zero import DeepSpeedStrategy, require_deepspeed

if TYPE_CHECKING:
    from clustertune.train.rl.runner import RLResult

log = logging.getLogger("clustertune")


def run_tokenizer(paths: RunPaths) -> Any:
    """The run's tokenizer, as the submitting side put it in the run directory (the one the
    prepared data was tokenized with; trained or loaded there, never here)."""
    from transformers import AutoTokenizer

    if not paths.has_tokenizer:
        raise DataError(f"run directory {paths.root} has no tokenizer/: its data was never prepared "
                        "(`clustertune run` prepares it before training starts)")
    return AutoTokenizer.from_pretrained(str(paths.tokenizer))


def make_accelerator(recipe: Recipe, paths: RunPaths, mixed: str | None = None, fsdp_plugin: Any = None) -> Any:
    from accelerate import Accelerator

    trackers = list(recipe.tracking.trackers)
    if trackers:
        paths.trackers.mkdir(exist_ok=True)
        tracker_env(trackers, paths.trackers)
    # Accelerate keeps one state per process, and refuses an Accelerator whose precision differs
    # from what an earlier one in this process set (a Trainer the user ran in the same notebook,
    # a run in fp32 before this one in bf16). This run's settings are the ones that count.
    reset_accelerate_state()
    acc = Accelerator(
        cpu=not torch.cuda.is_available(),
        mixed_precision=mixed_precision(recipe) if mixed is None else mixed,
        fsdp_plugin=fsdp_plugin,
        log_with=trackers or None,
        project_dir=str(paths.trackers),
    )
    if trackers:
        start_trackers(acc, recipe, paths.run_id)
    return acc


def make_strategy(recipe: Recipe, paths: RunPaths, from_rank0: bool = False) -> Strategy:
    """The node side's one place that turns the recipe into an Accelerator and a strategy.
    ``from_rank0``: FSDP's ranks other than 0 built the model on the meta device."""

    strategy = recipe.train.strategy
    t = recipe.train
    # Device, group and TF32 first: the precision probe and NCCL then see this rank's GPU.
    own_group = start_process_group(strategy == "fsdp", t.effective_offload != "none", t.collective_timeout_minutes)
    torch.set_float32_matmul_precision(fp32_matmul_precision(t.tf32, torch.cuda.is_available()))
    if strategy == "deepspeed":
        require_deepspeed()  # before an Accelerator exists: a missing package is a user error
        # DeepSpeed casts the model itself; the Accelerator only provides ranks and trackers.
        return DeepSpeedStrategy(recipe, make_accelerator(recipe, paths, mixed="no"), mixed_precision(recipe))

    plugin = fsdp_plugin(recipe, mixed_precision(recipe), from_rank0) if strategy == "fsdp" else None
    made = AccelerateStrategy(recipe, make_accelerator(recipe, paths, fsdp_plugin=plugin), sharded=plugin is not None,
                              from_rank0=from_rank0)
    made.own_group = own_group  # a group of one made for FSDP without a launcher: undone after the run
    return made


def execute(recipe: Recipe, paths: RunPaths, resume_from: Path | None, show_progress: bool,
            local_rank: int | None = None, stage_dir: str | None = None, stop: Any = None) -> LoopResult | RLResult:
    """Train ``recipe`` into ``paths``; returns the loop's result after saving the final model.

    The data was prepared by the submitting side (``data.json`` and ``tokenizer/`` in the run
    directory); here it is staged (when ``data.stage_to`` or ``stage_dir`` says so, once per
    node) and memory-mapped. ``local_rank`` defaults to ``$LOCAL_RANK`` (0 in-process).
    A loop ended by ``stop`` (a StopFlag) leaves its checkpoint and no final model.
    """
    # Accelerate's seeding, not transformers': that one lives in trainer_utils, which imports peft
    # (about 0.5 s of each rank's start) for runs without an adapter too. Both seed random, numpy,
    # torch and every device's generators from the one seed.
    from accelerate.utils import set_seed
    from transformers.utils import logging as hf_logging

    # transformers 5 draws a tqdm bar for every weight load and save; in a training log (and a
    # SLURM log file) those are noise. Our own progress reporting covers the run.
    hf_logging.disable_progress_bar()
    # Each step's freed activations stay in the process for the next step (train/host_malloc.py).
    keep_freed_memory()

    if recipe.traits.trainer == "trl":  # TRL's trainers run their own loop; they load their own data
        # Deferred: importing it pulls in accelerate, peft, tokenizers, transformers, which this module's importers do not need.
        from clustertune.train.rl import execute_rl

        return execute_rl(recipe, paths, resume_from, show_progress, stop=stop)

    # A user's DeepSpeed JSON decides the ZeRO stage and offload: every part of the run sees its values.
    recipe = with_deepspeed_json(recipe)
    t = recipe.train
    if t.cpu_threads:
        torch.set_num_threads(t.cpu_threads)
    tok = run_tokenizer(paths)
    config = resolve_config(recipe, tok, read_run_data(paths).labels)
    pad_vocab(config, vocab_multiple(recipe))
    # Under FSDP only rank 0 holds the whole model in host memory; the others build its
    # structure on the meta device and receive their shards from rank 0 (strategies/accel.py).
    from_rank0 = loads_from_rank0(recipe)
    on_meta = from_rank0 and int(os.environ.get("RANK", "0") or 0) != 0
    # The strategy (and its process group) before the model: under ZeRO-3 each rank builds only
    # its partitions, which takes the group (strategies/zero.py).
    strategy = make_strategy(recipe, paths, from_rank0)
    try:
        if t.fp8:
            check_fp8_device(strategy.device)  # this rank's GPU, before anything is built on it
        set_seed(t.seed)
        model = strategy.build(lambda: build_model(recipe, config, tok, on_meta=on_meta))
        if t.fp8:  # before the strategy wraps and compiles it: FSDP shards and compiles the FP8 layers
            to_fp8(strategy.unwrap(model), sharded=t.strategy == "fsdp")
        # Recorded with the state each rank holds (the loop's state_memory row).
        strategy.built_bytes = held_state.materialised_bytes(model)
        train_arrays, eval_arrays = _open_data(recipe, paths, local_rank, stage_dir)
        n_params = parameter_count(model)
        log.info("model: %s, %.2fM parameters", config.model_type, n_params / 1e6)
        if t.preflight and resume_from is None:  # once per run: a resumed run passed them already
            report = first_batches.run_checks(recipe, strategy.unwrap(model), train_arrays, tok,
                                              processes=strategy.num_processes, device=strategy.device,
                                              forward=forward, fresh_model=first_batches.fresh(recipe))
            if strategy.is_main_process:
                atomic_write_json(paths.preflight, report.record())
        seq_len = recipe.sequence_length
        with explain_out_of_memory(recipe, config, strategy.num_processes, mixed_precision(recipe) != "no", seq_len):
            result = train_loop(recipe, model, train_arrays, eval_arrays, paths, strategy, dump_recipe(recipe),
                                resume_from=resume_from, show_progress=show_progress, stop=stop)
        if result.stopped_by is not None:  # stopped on request: the checkpoint is the result
            strategy.end()
            return result
        _save_final(recipe, paths, strategy, result, tok, n_params, train_arrays, eval_arrays)
        strategy.end()
    finally:
        reset_accelerate_state()
        if strategy.own_group is not None:
            strategy.own_group.close()
    return result


def _open_data(recipe: Recipe, paths: RunPaths, local_rank: int | None, stage_dir: str | None) -> tuple[Any, Any]:
    """The run's train and eval arrays (staged first where asked), memory-mapped."""
    t0 = time.perf_counter()
    if local_rank is None:
        local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
    train_arrays, eval_arrays = open_run_data(recipe, paths, local_rank, stage_dir)
    if hasattr(train_arrays, "__len__"):
        log.info("data: %d train / %d eval samples (%d / %d tokens) opened in %.2fs",
                 len(train_arrays), len(eval_arrays), train_arrays.tokens, eval_arrays.tokens, time.perf_counter() - t0)
    else:
        log.info("data: train streamed (tokenized on the fly), %d eval samples (%d tokens) opened in %.2fs",
                 len(eval_arrays), eval_arrays.tokens, time.perf_counter() - t0)
    return train_arrays, eval_arrays


def _save_final(recipe: Recipe, paths: RunPaths, strategy: Any, result: LoopResult, tok: Any, n_params: int,
                train_arrays: Any, eval_arrays: Any) -> None:
    """Every rank takes part in gathering the shards; the main process writes a plain
    save_pretrained directory that loads without clustertune or the strategy, and summary.json."""
    weights = strategy.full_state_dict(result.model)
    strategy.wait_for_everyone()
    if not strategy.is_main_process:
        return
    plain = strategy.unwrap(result.model)
    if recipe.traits.head == "causal_lm" and recipe.model.adapter is None:
        # generation_config.json from the tokenizer trained with: its end-of-text and, for a chat
        # template whose end-of-turn marker is one token (<|im_end|>), that marker as well.
        set_generation_ids(plain, tok)
    save_pretrained(plain, str(paths.model), state_dict=weights)
    tok.save_pretrained(str(paths.model))
    if recipe.model.adapter is not None and recipe.model.adapter.save_merged:
        merge_adapter(paths.model, paths.merged_model)
    summary = {
        "steps": result.steps, "final_eval": result.final_eval, "tokens_per_s": result.tokens_per_s,
        "samples_seen": result.samples_seen, "train_seconds": result.train_seconds, "parameters": n_params,
        "train_samples": len(train_arrays) if hasattr(train_arrays, "__len__") else None,
        "eval_samples": len(eval_arrays), "resumed_from_step": result.resumed_from_step, "evals": result.evals,
        "precision": precision_name(recipe),
    }
    paths.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    log_final(getattr(strategy, "accelerator", None), summary, result.steps)
