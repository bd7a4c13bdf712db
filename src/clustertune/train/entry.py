"""Node-side execution of one run: tokenizer, model, data arrays, Accelerator, the loop, the
final model. Everything it needs is in the run directory (the resolved recipe) plus the
checkpoint to resume from; the submitting side has already checked the inputs.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from clustertune.data.prepare import prepare_split
from clustertune.data.sources import RawData
from clustertune.errors import UserError
from clustertune.models.build import build_model, resolve_config
from clustertune.models.tokenizer import load_tokenizer, train_bpe
from clustertune.recipe.load import dump_recipe
from clustertune.recipe.schema import TOKENIZER_TRAIN, Recipe
from clustertune.runs.paths import RunPaths
from clustertune.train.loop import LoopResult, train_loop
from clustertune.train.fastpath import pad_vocab, vocab_multiple
from clustertune.train.metrics import flat_config, tracker_env
from clustertune.train.strategies import Strategy
from clustertune.train.strategies.base import OutOfMemory, out_of_memory_message

log = logging.getLogger("clustertune")


def mixed_precision(recipe: Recipe) -> str:
    """Accelerate's mixed_precision for this recipe on this machine."""
    p = recipe.train.precision
    if p == "auto":
        if torch.cuda.is_available():
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "no"
    if p == "fp16" and not torch.cuda.is_available():
        raise UserError("train.precision: fp16 needs a CUDA GPU; use bf16 or fp32 on CPU")
    return {"fp32": "no"}.get(p, p)


def run_tokenizer(recipe: Recipe, raw: RawData, paths: RunPaths) -> Any:
    """The run's tokenizer: reused from the run directory on resume, else trained or loaded, then saved."""
    from transformers import AutoTokenizer

    if (paths.tokenizer / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(paths.tokenizer))
    m = recipe.model
    source = m.tokenizer or m.name_or_path or ""
    if source == TOKENIZER_TRAIN:
        t0 = time.perf_counter()
        texts = [x for x in raw.train[recipe.data.text_column] if isinstance(x, str)]
        limit = max(recipe.data.block_size, recipe.data.max_length)
        tok = train_bpe(texts, m.tokenizer_vocab_size, classification=recipe.task == "sequence_classification",
                        model_max_length=limit)
        log.info("trained a byte-level BPE tokenizer (%d tokens) in %.1fs", len(tok), time.perf_counter() - t0)
    else:
        tok = load_tokenizer(source)
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token  # GPT-2-style tokenizers ship without one
    tok.save_pretrained(str(paths.tokenizer))
    return tok


def make_accelerator(recipe: Recipe, paths: RunPaths, mixed: str | None = None, fsdp_plugin: Any = None) -> Any:
    from accelerate import Accelerator

    trackers = list(recipe.tracking.trackers)
    if trackers:
        paths.trackers.mkdir(exist_ok=True)
        tracker_env(trackers, paths.trackers)
    acc = Accelerator(
        cpu=not torch.cuda.is_available(),
        mixed_precision=mixed_precision(recipe) if mixed is None else mixed,
        fsdp_plugin=fsdp_plugin,
        log_with=trackers or None,
        project_dir=str(paths.trackers),
    )
    if trackers:
        acc.init_trackers(f"{recipe.tracking.project}-{paths.run_id}" if "tensorboard" in trackers else recipe.tracking.project,
                          config=flat_config(recipe.to_plain()))
    return acc


def make_strategy(recipe: Recipe, paths: RunPaths) -> Strategy:
    """The node side's one place that turns the recipe into an Accelerator and a strategy."""
    strategy = recipe.train.strategy
    if strategy == "deepspeed":
        from clustertune.train.strategies.zero import DeepSpeedStrategy, require_deepspeed

        require_deepspeed()  # before an Accelerator exists: a missing package is a user error
        # DeepSpeed casts the model itself; the Accelerator only provides ranks and trackers.
        return DeepSpeedStrategy(recipe, make_accelerator(recipe, paths, mixed="no"), mixed_precision(recipe))
    from clustertune.train.strategies.accel import AccelerateStrategy, fsdp_plugin

    plugin = fsdp_plugin(recipe) if strategy == "fsdp" else None
    return AccelerateStrategy(recipe, make_accelerator(recipe, paths, fsdp_plugin=plugin), sharded=plugin is not None)


def reset_accelerate_state() -> None:
    """Accelerate keeps process-wide state; clear it so this process can run another recipe."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def execute(recipe: Recipe, raw: RawData, paths: RunPaths, resume_from: Path | None, show_progress: bool) -> LoopResult:
    """Train ``recipe`` into ``paths``; returns the loop's result after saving the final model."""
    from transformers import set_seed
    from transformers.utils import logging as hf_logging

    # transformers 5 draws a tqdm bar for every weight load and save; in a training log (and a
    # SLURM log file) those are noise. Our own progress reporting covers the run.
    hf_logging.disable_progress_bar()
    t = recipe.train
    if t.cpu_threads:
        torch.set_num_threads(t.cpu_threads)
    tok = run_tokenizer(recipe, raw, paths)
    config = resolve_config(recipe, tok)
    pad_vocab(config, vocab_multiple(recipe))
    set_seed(t.seed)
    model = build_model(recipe, config, tok)
    t0 = time.perf_counter()
    train_arrays = prepare_split(recipe, raw.train, tok, "train")
    eval_arrays = prepare_split(recipe, raw.validation, tok, "validation")
    log.info("data: %d train / %d eval samples (%d / %d tokens) prepared in %.1fs",
             len(train_arrays), len(eval_arrays), train_arrays.tokens, eval_arrays.tokens, time.perf_counter() - t0)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %s, %.2fM parameters", config.model_type, n_params / 1e6)
    strategy = make_strategy(recipe, paths)
    try:
        try:
            result = train_loop(recipe, model, train_arrays, eval_arrays, paths, strategy, dump_recipe(recipe),
                                resume_from=resume_from, show_progress=show_progress)
        except torch.OutOfMemoryError as exc:
            seq_len = int(train_arrays.input_ids.shape[1])
            raise OutOfMemory(out_of_memory_message(recipe.train, seq_len, exc)) from exc
        # Every rank takes part in gathering the shards; the main process writes a plain
        # save_pretrained directory that loads without clustertune or the strategy.
        weights = strategy.full_state_dict(result.model)
        strategy.wait_for_everyone()
        if strategy.is_main_process:
            strategy.unwrap(result.model).save_pretrained(str(paths.model), state_dict=weights)
            tok.save_pretrained(str(paths.model))
            summary = {
                "steps": result.steps, "final_eval": result.final_eval, "tokens_per_s": result.tokens_per_s,
                "samples_seen": result.samples_seen, "train_seconds": result.train_seconds,
                "parameters": n_params, "train_samples": len(train_arrays), "eval_samples": len(eval_arrays),
                "resumed_from_step": result.resumed_from_step, "evals": result.evals,
            }
            paths.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        strategy.end()
    finally:
        reset_accelerate_state()
    return result
