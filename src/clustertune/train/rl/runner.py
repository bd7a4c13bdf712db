"""One RL run on TRL's trainers: build the trainer from the recipe, train, save the policy.

The recipe's ``train`` section maps onto TRL's config (batch = completions per device per step,
lr, schedule, steps, logging, checkpoints); the ``rl`` section supplies generation, KL and the
rewards. Under ``accelerate launch``/``torchrun`` TRL's trainers distribute generation and
training across the processes themselves; everything here that writes files runs on the main
process.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from clustertune import startup
from clustertune.errors import RewardError
from clustertune.recipe.load import dump_recipe
from clustertune.recipe.rl_recipe import RLRecipe, as_rl_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths
from clustertune.train import checkpoint as ckpt
from clustertune.train.metrics import log_final, start_trackers, tracker_env, truncate_after
from clustertune.train.strategies.group import local_device
from clustertune.train.rl.callbacks import EvalSet, RunCallback, StopRequested
from clustertune.train.rl.checkpoints import scratch_dir
from clustertune.train.rl.rewards import Reward, build_rewards
from clustertune.train.rl.sources import eval_prompts, load_rl_data, resolve_model
from clustertune.train.schedule import trainer_schedule
from clustertune.models.tokenizer import load_tokenizer
from clustertune.models.build import announced_load
from clustertune.train.precision import reset_accelerate_state
from clustertune.train.precision import mixed_precision, precision_name
from clustertune.train.rl.ppo import make_ppo_trainer
from clustertune.train.rl.ppo import refuse_resume
from clustertune.train.rl.ppo import ppo_config

log = logging.getLogger("clustertune")


@dataclass
class RLResult:
    """How an RL run ended: its summary, or the step a stop request checkpointed and ended it at."""

    steps: int
    summary: dict[str, Any] = field(default_factory=dict)
    stopped_by: str | None = None  # a stop request (signal, stop file) ended it; checkpoint written


# train.optimizer -> the name TrainingArguments.optim gives the same optimizer.
TRAINER_OPTIM = {"adamw": "adamw_torch", "adafactor": "adafactor", "sgd": "sgd", "adamw_8bit": "adamw_bnb_8bit",
                 "paged_adamw_8bit": "paged_adamw_8bit"}

def trainer_args(recipe: RLRecipe, paths: RunPaths, weights: list[float]) -> Any:
    """TRL's config for this recipe (GRPOConfig, RLOOConfig, PPOConfig or DPOConfig)."""
    from trl import DPOConfig, GRPOConfig, KTOConfig, RLOOConfig

    t, rl = recipe.train, recipe.rl
    precision = mixed_precision(recipe)
    steps = t.max_steps or -1
    common: dict[str, Any] = dict(
        output_dir=str(scratch_dir(paths)),
        use_cpu=not torch.cuda.is_available(),
        per_device_train_batch_size=t.batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        learning_rate=t.lr, weight_decay=t.weight_decay,
        adam_beta1=t.adam_beta1, adam_beta2=t.adam_beta2, adam_epsilon=t.adam_eps,
        optim=TRAINER_OPTIM[t.optimizer], optim_args=f"momentum={t.momentum}" if t.optimizer == "sgd" else None,
        max_grad_norm=t.max_grad_norm if t.max_grad_norm is not None else 0.0,
        **trainer_schedule(t),
        max_steps=steps, num_train_epochs=t.epochs,
        logging_steps=t.log_every, logging_first_step=False,
        save_strategy="steps" if t.save_every else "no", save_steps=t.save_every or 500,
        seed=t.seed, data_seed=t.seed,
        bf16=precision == "bf16", fp16=precision == "fp16",
        report_to=[], disable_tqdm=True,
        beta=rl.kl_beta(),
        dataloader_num_workers=0,
    )
    # TRL turns activation recomputation on by default; the recipe decides (off unless asked for).
    common["gradient_checkpointing"] = t.gradient_checkpointing
    if rl.algorithm == "dpo":
        return DPOConfig(**common, max_length=2 * rl.max_prompt_tokens)
    if rl.algorithm == "kto":
        return KTOConfig(**common, max_length=2 * rl.max_prompt_tokens, desirable_weight=rl.desirable_weight,
                         undesirable_weight=rl.undesirable_weight)
    if rl.algorithm == "ppo":
        return ppo_config(recipe, common)
    gen = dict(num_generations=rl.num_generations, max_completion_length=rl.max_new_tokens, temperature=rl.temperature,
               top_p=rl.top_p, reward_weights=weights, shuffle_dataset=t.shuffle, log_completions=False)
    return (GRPOConfig if rl.algorithm == "grpo" else RLOOConfig)(**common, **gen)


def _cut_prompts(ds: Any, tok: Any, limit: int) -> Any:
    """Prompts longer than ``limit`` tokens keep their first ``limit`` tokens."""
    def cut(row: dict[str, Any]) -> dict[str, Any]:
        ids = tok(row["prompt"], add_special_tokens=False)["input_ids"]
        return {"prompt": tok.decode(ids[:limit])} if len(ids) > limit else {}

    return ds.map(cut)


def _before_training(recipe: RLRecipe, resume_from: Path | None, show_progress: bool) -> None:
    """What is refused or set up before anything loads: a PPO resume, a checkpoint that does not
    verify, the CPU threads, the libraries' progress bars."""
    if recipe.rl.algorithm == "ppo" and resume_from is not None:
        raise refuse_resume(str(resume_from))
    if resume_from is not None:
        # The trainer unpickles what it finds there (RNG and optimizer states): on every rank,
        # the signature and every file's digest first.
        ckpt.verify_checkpoint(resume_from)
    if recipe.train.cpu_threads:
        torch.set_num_threads(recipe.train.cpu_threads)
    if not show_progress or not sys.stderr.isatty():  # a bar in a log file is noise
        import datasets
        import transformers

        datasets.disable_progress_bars()
        transformers.utils.logging.disable_progress_bar()


def execute_rl(recipe: Recipe, paths: RunPaths, resume_from: Path | None, show_progress: bool,
               stop: Any = None) -> RLResult:
    """Tune ``recipe.rl.policy`` into ``paths`` (the summary goes to summary.json).

    ``stop`` (a StopFlag) ends the run early: at the next logging step all ranks agree, write a
    checkpoint and return with ``stopped_by`` set and no final model, as a preempted job needs.
    """
    from transformers import set_seed

    recipe = as_rl_recipe(recipe)
    rl, t = recipe.rl, recipe.train
    _before_training(recipe, resume_from, show_progress)
    policy_path, tok, train_ds, rewards, eval_set = _inputs(recipe, paths)
    set_seed(t.seed)
    # Accelerate's process-wide state from whatever ran before in this process (another
    # precision, a user's Trainer) would make TRL's Accelerator refuse this run's settings.
    reset_accelerate_state()
    policy, ref = _policy_and_reference(recipe, policy_path, tok)
    callback = RunCallback(recipe, paths, tok, rewards, eval_set, dump_recipe(recipe), show_progress, resume_from is not None,
                           stop=stop)
    trainer = _trainer(recipe, paths, policy, ref, policy_path, tok, train_ds, rewards, callback)
    main = trainer.accelerator.is_main_process
    if resume_from is not None and main:
        dropped = truncate_after(paths.metrics, _step_of(resume_from) or 0)
        log.info("resumed from %s; dropped %d metric rows of the lost attempt", resume_from.name, dropped)
        ckpt.announce_load(resume_from, "the policy, optimizer and scheduler")
    startup.release()  # TRL's loop is the work: the process's start is over
    try:
        try:
            if rl.algorithm == "ppo":
                trainer.train()  # no resume_from_checkpoint: refused above
            else:
                trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
        except RewardError:
            _save_on_failure(trainer, callback, paths)
            raise
        except StopRequested as stopped:
            if callback.progress is not None:
                callback.progress.close()
            log.info("stop request (%s): checkpoint at step %d written; stopping", stopped.by, stopped.step)
            return RLResult(steps=stopped.step, stopped_by=stopped.by)
        summary = {
            "algorithm": rl.algorithm, "steps": trainer.state.global_step, "train_seconds": callback.train_seconds,
            "resumed_from_step": _step_of(resume_from),
            "initial_eval": next((e for e in callback.evals if e["step"] == 0), None),
            "final_eval": callback.evals[-1] if callback.evals else None, "evals": callback.evals,
            "policy": policy_path, "train_prompts": len(train_ds), "precision": precision_name(recipe),
        }
        _save_results(trainer, tok, paths, summary, main)
        if main:
            log_final(trainer.accelerator, summary, trainer.state.global_step)
        return RLResult(steps=trainer.state.global_step, summary=summary)
    finally:
        for tracker in trainer.accelerator.trackers:  # flush and close them; the process group stays as TRL left it
            tracker.finish()
        reset_accelerate_state()


def _trainer(recipe: RLRecipe, paths: RunPaths, policy: Any, ref: Any, policy_path: str, tok: Any, train_ds: Any,
             rewards: list[Reward], callback: RunCallback) -> Any:
    """TRL's trainer for the recipe's algorithm, with the run's callback and trackers."""
    from transformers.trainer_callback import PrinterCallback

    rl = recipe.rl
    args = trainer_args(recipe, paths, [r.weight for r in rewards])
    if rl.algorithm == "ppo":
        value_path = resolve_model(rl.value_model, "rl.value_model", recipe.tracking.runs_root) if rl.value_model else policy_path
        trainer = make_ppo_trainer(recipe, policy, ref, value_path, rewards[0].score, args, train_ds, tok, callback)
    else:
        trainer = _make_trainer(rl.algorithm, policy, ref, args, train_ds, tok, [r.trl_function() for r in rewards], callback)
    callback.trainer = trainer
    _open_trackers(trainer.accelerator, recipe, paths)
    trainer.remove_callback(PrinterCallback)  # it prints every log dict; the run's log has them already
    return trainer


def _save_results(trainer: Any, tok: Any, paths: RunPaths, summary: dict[str, Any], main: bool) -> None:
    """The main process writes the policy (save_pretrained, with its tokenizer) and the summary,
    and drops TRL's scratch directory; every rank then waits for it."""
    if main:
        trainer.save_model(str(paths.model))
        tok.save_pretrained(str(paths.model))
        paths.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(scratch_dir(paths), ignore_errors=True)
    trainer.accelerator.wait_for_everyone()


def _inputs(recipe: RLRecipe, paths: RunPaths) -> tuple[str, Any, Any, list[Reward], EvalSet]:
    """The policy's path and tokenizer (saved into the run by rank 0), the training prompts,
    the rewards and the evaluation set."""

    rl = recipe.rl
    raw = load_rl_data(recipe)
    policy_path = resolve_model(rl.policy, "rl.policy", recipe.tracking.runs_root)
    tok = load_tokenizer(policy_path, "rl.policy")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if int(os.environ.get("RANK", "0")) == 0:  # before the trainer exists, torchrun's env says who writes
        tok.save_pretrained(str(paths.tokenizer))
    train_ds = _cut_prompts(raw.train, tok, rl.max_prompt_tokens)
    model_paths = [resolve_model(r.model, f"rl.rewards.{i}.model", recipe.tracking.runs_root) if r.model else None
                   for i, r in enumerate(rl.rewards)]
    # This rank's GPU, not device 0: the trainer has not set the per-rank device yet.
    device = local_device()
    if device.type == "cuda":
        torch.cuda.set_device(device)  # and the precision probe's CUDA context goes there too
    rewards = build_rewards(rl.rewards, model_paths, device)
    if "chosen" in raw.validation.column_names:
        eval_set = EvalSet(pairs={k: list(raw.validation[k]) for k in ("prompt", "chosen", "rejected")})
    elif "label" in raw.validation.column_names:
        eval_set = EvalSet(labelled={k: list(raw.validation[k]) for k in ("prompt", "completion", "label")})
    else:
        eval_set = EvalSet(prompts=eval_prompts(recipe, raw))
    return policy_path, tok, train_ds, rewards, eval_set


def _policy_and_reference(recipe: RLRecipe, policy_path: str, tok: Any) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    rl = recipe.rl
    with announced_load(policy_path, "rl policy"):
        policy = AutoModelForCausalLM.from_pretrained(policy_path)
    if policy.generation_config.pad_token_id is None:
        policy.generation_config.pad_token_id = tok.pad_token_id
    ref = None
    if rl.reference:
        ref_path = resolve_model(rl.reference, "rl.reference", recipe.tracking.runs_root)
        if rl.preference or rl.algorithm == "ppo":
            with announced_load(ref_path, "rl.reference"):
                ref = AutoModelForCausalLM.from_pretrained(ref_path)
        else:
            # GRPO/RLOO build their KL reference from the path the policy was loaded from (and
            # prepare it their own way); pointing that path at the reference makes them load it.
            policy.config._name_or_path = ref_path
    return policy, ref


def _open_trackers(acc: Any, recipe: Recipe, paths: RunPaths) -> None:
    """The recipe's trackers on the trainer's Accelerator, as supervised runs open them on theirs;
    the run callback's MetricsWriter then forwards every metrics row to them."""
    from accelerate.tracking import filter_trackers

    trackers = list(recipe.tracking.trackers)
    if not trackers:
        return
    paths.trackers.mkdir(exist_ok=True)
    tracker_env(trackers, paths.trackers)
    acc.project_configuration.project_dir = acc.project_configuration.logging_dir = str(paths.trackers)
    acc.log_with = filter_trackers(trackers, str(paths.trackers))
    start_trackers(acc, recipe, paths.run_id)


def _step_of(ckpt_dir: Path | None) -> int | None:
    if ckpt_dir is None:
        return None
    return int(json.loads((ckpt_dir / "state.json").read_text())["step"])


def _make_trainer(algorithm: str, policy: Any, ref: Any, args: Any, train_ds: Any, tok: Any,
                  reward_funcs: list[Any], callback: RunCallback) -> Any:
    from trl import DPOTrainer, GRPOTrainer, KTOTrainer, RLOOTrainer

    if algorithm in ("dpo", "kto"):
        cls = DPOTrainer if algorithm == "dpo" else KTOTrainer
        return cls(model=policy, ref_model=ref, args=args, train_dataset=train_ds, processing_class=tok,
                   callbacks=[callback])
    cls = GRPOTrainer if algorithm == "grpo" else RLOOTrainer
    return cls(model=policy, reward_funcs=reward_funcs, args=args, train_dataset=train_ds, processing_class=tok,
               callbacks=[callback])


def _save_on_failure(trainer: Any, callback: RunCallback, paths: RunPaths) -> None:
    """Keep the last completed step when a reward breaks mid-run, so the fixed run can --resume."""
    step = trainer.state.global_step
    if step == 0 or paths.checkpoint(step).is_dir():
        return
    trainer._save_checkpoint(trainer.model, trial=None)
    callback.adopt(step, Path(trainer.args.output_dir) / f"checkpoint-{step}", trainer.state.max_steps)
