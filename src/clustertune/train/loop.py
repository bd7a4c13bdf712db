"""The training loop: one function, read top to bottom.

What it changes as it runs is one ``LoopState``, and what it works with one ``LoopParts``; the
pieces of a step (forward and backward, the log row, an evaluation, a checkpoint) are functions
of the two, called in order from ``train_loop``.

How the model is spread across processes (DDP, FSDP, DeepSpeed ZeRO) and the precision live
in the strategy handed in; the loop calls it the same way for all and never branches on it.
The loss stays on the device between log intervals: reading it (``.item()``) is a host-device
sync, so it happens only every ``train.log_every`` steps, at evaluation and at checkpoints.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from clustertune.tasks import task_of
from clustertune.tasks.base import Task
from clustertune.data.loader import Position, eval_batches, make_train_batches
from clustertune.data.prepare import Arrays
from clustertune import startup
from clustertune.errors import DivergedError
from clustertune.recipe.compute_checks import groups_by_length
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths
from clustertune.train import checkpoint as ckpt
from clustertune.train import faults
from clustertune.train import held_state
from clustertune.tasks.cls_metrics import MetricFn, compute, metric_functions
from clustertune.train.metrics import MetricsWriter, truncate_after
from clustertune.train.optim import make_optimizer
from clustertune.train.strategies import Strategy
from clustertune.train.progress import Progress
from clustertune.train.schedule import RecipeSchedule
from clustertune.train.sft_eval import make_generation_check
from clustertune.train.sft_loss import TrainedPositions, sft_forward
from clustertune.train.throughput import device_peak_flops, flops_per_token, mfu

log = logging.getLogger("clustertune")

# The older fault variables, named here for the tests and the RL callbacks that import them.
KILL_AT_STEP_ENV = faults.KILL_AT_STEP_ENV
KILL_ONCE_ENV = faults.KILL_ONCE_ENV


@dataclass
class LoopResult:
    steps: int
    final_eval: dict[str, float]
    tokens_per_s: float | None
    samples_seen: int
    train_seconds: float
    resumed_from_step: int | None = None
    evals: list[dict[str, Any]] = field(default_factory=list)
    stopped_by: str | None = None  # a stop request ended the loop early (checkpoint written)
    model: Any = None  # as the strategy holds it (wrapped, maybe sharded): for the final gather


def diverged(recipe: Recipe, step: int, loss: float, grad_norm: float | None, when: str) -> DivergedError:
    """The error that stops a run whose loss or gradient norm stopped being a finite number."""
    t = recipe.train
    what = f"loss {loss}" + (f", gradient norm {grad_norm}" if grad_norm is not None else "")
    cause = (f"the learning rate is likely too high for this model (train.lr={t.lr:g}); lower train.lr, "
             "raise train.warmup_steps or set train.max_grad_norm")
    if t.precision == "fp16":
        cause += ", or use train.precision=bf16 (fp16 overflows)"
    return DivergedError(f"training diverged at step {step} ({what}, {when}); {cause}. "
                         "No checkpoint of the diverged state was written: resume continues from the last good one")


def _weights_finite(model: torch.nn.Module) -> bool:
    """Whether this rank's part of every trainable weight is finite (its shard under FSDP)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                local = p.to_local() if hasattr(p, "to_local") else p
                if not bool(torch.isfinite(local).all()):
                    return False
    return True


def _finite_check(strategy: Strategy, loss_sum: torch.Tensor, grad_norm: Any,
                  model: torch.nn.Module | None = None) -> tuple[float, float | None, bool]:
    """The loss sum averaged over ranks, this step's gradient norm, and whether every rank's were
    finite, and its weights too when ``model`` is given (one all-reduce: the ranks agree, so all
    of them stop together)."""
    gn = torch.as_tensor(0.0 if grad_norm is None else grad_norm, dtype=torch.float32).to(loss_sum.device)
    bad = (~torch.isfinite(loss_sum) | ~torch.isfinite(gn)).float()
    if model is not None and not _weights_finite(model):
        bad = torch.ones_like(bad)
    mean = strategy.reduce(torch.stack([loss_sum.float(), bad]), reduction="mean")
    loss, any_bad = mean[0].item(), mean[1].item() > 0
    return loss, (None if grad_norm is None else float(gn)), not any_bad and math.isfinite(loss)


def total_steps(recipe: Recipe, steps_per_epoch: int) -> int:
    t = recipe.train
    return t.max_steps if t.max_steps is not None else max(1, math.ceil(t.epochs * steps_per_epoch))


def forward(model: torch.nn.Module, batch: dict[str, torch.Tensor], kept: TrainedPositions | None = None) -> Any:
    """The model's output on one batch: the only forward call of training and evaluation.
    With ``kept`` (SFT), the output layer sees only the trained positions (``train.sft_loss``).

    Packed SFT rows carry ``position_ids`` that restart per example and no attention mask;
    transformers turns those into a block-diagonal causal mask only when no KV cache is passed,
    and with ``use_cache=True`` (the default of Llama and GPT-2) it builds a cache, skips that
    detection and lets an example attend to the one before it. So no cache when training."""
    if kept is not None:
        return sft_forward(model, batch, kept)
    if "position_ids" in batch:
        return model(**batch, use_cache=False)
    return model(**batch)


def token_shares(micro_batches: list[dict[str, torch.Tensor]], strategy: Strategy) -> torch.Tensor:
    """Each micro-batch's weight so that a step's loss is the mean over all its trained tokens,
    on every rank together: SFT batches hold different numbers of labels, and a mean of
    per-batch means would weigh a short answer's tokens more than a long one's. The gradient
    average across ranks divides by the world size, hence the factor. A small all-reduce, no
    host sync."""
    counts = torch.stack([(b["labels"][:, 1:] != -100).sum() for b in micro_batches]).to(torch.float32)
    total = strategy.reduce(counts.sum(), reduction="sum")
    return counts * strategy.num_processes / total.clamp(min=1.0)


@torch.no_grad()
def evaluate(model: torch.nn.Module, arrays: Arrays, task: str, batch_size: int, strategy: Strategy,
             metric_fns: list[MetricFn] | None = None, kept: TrainedPositions | None = None) -> dict[str, float]:
    """Mean loss over every evaluation sample (all ranks), plus what the task reports
    (perplexity, accuracy), and for a classifier the ``metric_fns`` on the predictions and
    labels of the whole set."""
    kind = task_of(task)
    model.eval()
    dev = strategy.device
    sums = torch.zeros(3, device=dev, dtype=torch.float64)  # loss*n, n, correct
    collect = kind.predicts_labels and bool(metric_fns)
    # Predictions and labels at their sample's index (0 elsewhere): summed across ranks, each
    # holds the whole set in the data's order.
    preds = torch.zeros(len(arrays) if collect else 0, device=dev, dtype=torch.long)
    refs = torch.zeros_like(preds)
    seen = 0  # this rank's samples so far: its j-th is sample rank + j * world
    # Every rank runs the same number of batches (see eval_batches): padding rows carry label
    # -100 and a batch of padding only is run (a collective under sharding) but not counted.
    for batch, n in eval_batches(arrays, batch_size, strategy.process_index, strategy.num_processes, dev):
        with strategy.autocast():
            out = kind.output(model, batch, lambda m, b: forward(m, b, kept))
        if n == 0:
            continue
        weight = kind.weight(batch, n)  # samples, or trained tokens where the loss is their mean
        sums[0] += out.loss.double() * weight
        sums[1] += weight
        if (right := kind.correct(out, batch, n)) is not None:
            sums[2] += right
            if collect:
                predicted = out.logits[:n].argmax(-1)
                at = strategy.process_index + strategy.num_processes * torch.arange(seen, seen + n, device=dev)
                preds[at], refs[at] = predicted, batch["labels"][:n]
                seen += n
    sums = strategy.reduce(sums, reduction="sum")
    model.train()
    res = kind.summary_metrics((sums[0] / sums[1]).item(), (sums[2] / sums[1]).item())
    if collect:
        preds, refs = strategy.reduce(preds, reduction="sum"), strategy.reduce(refs, reduction="sum")
        res.update(compute(metric_fns or [], preds.cpu().numpy(), refs.cpu().numpy()))
    return res


def eval_interval(recipe: Recipe, steps_per_epoch: int | None) -> int | None:
    """Steps between evaluations: ``train.eval_every``, or an epoch's steps for ``epoch``."""
    every = recipe.train.eval_every
    return steps_per_epoch if every == "epoch" else every


@dataclass
class LoopState:
    """What the loop changes as it runs: its steps, log rows, evaluations and checkpoints all
    read and write this one object."""
    step: int
    pos: Position
    loss_sum: torch.Tensor  # the running loss since the last log row, left on the device
    steps_since_log: int = 0
    grad_norm: Any = None  # the latest step's gradient norm, for its log row
    checked_norm: Any = None  # the same as divergence checks see it (None under fp16's loss scaler)
    paused: float = 0.0  # seconds spent evaluating and checkpointing since the last log: not training
    t_log: float = 0.0  # when the last log interval began (perf_counter)
    steps_at_log: int = 0  # the step it began at
    tokens_in_log: float = 0.0  # real tokens of the steps since then (all ranks)
    tok_s: float | None = None  # tokens/s over the last log interval
    last_save: float = 0.0  # when the newest checkpoint was written, or the loop began (perf_counter)
    saved_at: int = -1  # the step of the newest checkpoint this attempt wrote
    last_eval: dict[str, float] = field(default_factory=dict)
    evals: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class LoopParts:
    """What the loop works with and never replaces: built once by ``train_loop``."""
    recipe: Recipe
    strategy: Strategy
    model: Any  # as the strategy holds it (wrapped, maybe sharded)
    optimizer: Any
    scheduler: Any
    steps: int  # the last step of the run
    batches: Any  # the training batches (for the epoch of a position)
    paths: RunPaths
    recipe_yaml: str  # sealed into every checkpoint
    metrics: MetricsWriter
    progress: Progress
    eval_arrays: Arrays
    task: Task  # the task's loss and what its evaluations count
    kept: TrainedPositions | None  # SFT: the output layer sees the trained positions only
    metric_fns: list[MetricFn]
    generation_check: Any  # SFT: answers generated at each evaluation, or None
    hold_watchdog: Any  # holds the hang watchdog off while evaluating or checkpointing
    scaled_loss: bool  # fp16's loss scaler: an infinite gradient norm is a skipped step
    flops_tok: float
    peak: float | None


def resume(state: LoopState, checkpoint: Any, strategy: Strategy, model: Any, optimizer: Any, scheduler: Any,
           paths: RunPaths) -> None:
    """Load ``checkpoint`` into the model, optimizer, scheduler and ``state``; the metrics rows
    the lost attempt wrote after it are dropped."""
    saved = ckpt.load_distributed(checkpoint, strategy, model, optimizer, scheduler)
    state.step, state.pos = int(saved["step"]), Position.from_dict(saved["position"])
    state.loss_sum += float(saved.get("loss_since_log", 0.0))
    state.steps_since_log = int(saved.get("steps_since_log", 0))
    if strategy.is_main_process:
        dropped = truncate_after(paths.metrics, state.step)
        log.info("resumed from %s (step %d, %d samples seen); dropped %d metric rows of the lost attempt",
                 checkpoint.name, state.step, state.pos.samples_seen, dropped)


def train_step(parts: LoopParts, state: LoopState, micro_batches: list[dict[str, torch.Tensor]],
               probe: bool) -> tuple[dict[str, int], dict[str, int]] | None:
    """Forward and backward over the step's micro-batches, then the optimizer step. With
    ``probe`` (this attempt's first step): what this rank held between micro-batches and just
    before the optimizer step."""
    model, strategy, optimizer = parts.model, parts.strategy, parts.optimizer
    # SFT (the trained positions kept): the step's loss is the mean over its trained tokens.
    shares = token_shares(micro_batches, strategy) if parts.kept is not None else None
    held_between: dict[str, int] = {}
    for i, batch in enumerate(micro_batches):
        # Gradients are synchronised across ranks on the last micro-batch only.
        with strategy.accumulating(model, last=i == len(micro_batches) - 1):
            with strategy.autocast():
                out = parts.task.output(model, batch, lambda m, b: forward(m, b, parts.kept))
                # fp32 whatever the outputs' dtype
                loss = out.loss.float() * shares[i] if shares is not None else out.loss.float() / len(micro_batches)
            # The step's middle: forward done, backward not.
            faults.point("backward", state.step + 1, strategy.process_index)
            strategy.backward(loss)
        state.loss_sum += loss.detach()
        if probe and i == 0 and len(micro_batches) > 1:
            # Between micro-batches: what accumulation keeps (sharded or whole gradients).
            held_between = strategy.state_bytes(model, optimizer)
    held_before = strategy.state_bytes(model, optimizer) if probe else None
    # Clip, optimizer and scheduler step, zero the gradients.
    state.grad_norm = strategy.step(model, optimizer, parts.scheduler, parts.recipe.train.max_grad_norm)
    # fp16's loss scaler meets infinite gradients by design and skips that step: only
    # other precisions count a non-finite gradient norm as divergence.
    state.checked_norm = None if parts.scaled_loss else state.grad_norm
    return (held_between, held_before) if held_before is not None else None


def record_state_memory(parts: LoopParts, step: int, held_between: dict[str, int],
                        held_before: dict[str, int]) -> None:
    """What each rank held around this attempt's first step, now just after it: a metrics row,
    and a log line when there are several ranks. A collective, once per attempt."""
    strategy = parts.strategy
    held = held_state.held_around_first_step(held_between, held_before, strategy.state_bytes(parts.model, parts.optimizer))
    # Host bytes the model took when this rank built it (before any sharding).
    held["built"] = int(strategy.built_bytes)
    per_rank = held_state.gather_per_rank(strategy, held)
    parts.metrics.log({"kind": "state_memory", "step": step, "ranks": per_rank, "time": time.time()})
    if len(per_rank) > 1:  # one process: the metrics row has it, the screen need not
        log.info("state held per rank after step %d (MiB): %s", step, "; ".join(
            f"rank {i}: " + ", ".join(f"{k} {v / 2**20:.2f}" for k, v in r.items())
            for i, r in enumerate(per_rank)))


def log_train_row(parts: LoopParts, state: LoopState) -> None:
    """The log step's metrics row and progress figures; a new log interval begins."""
    strategy, step = parts.strategy, state.step
    # CPU-GPU sync point: the only place the loss leaves the device.
    # After the last step the weights are checked too: they become the saved model.
    loss_mean_sum, norm, finite = _finite_check(strategy, state.loss_sum, state.checked_norm,
                                                parts.model if step == parts.steps else None)
    if not finite:
        raise diverged(parts.recipe, step, loss_mean_sum / state.steps_since_log, norm, "checked at a log step")
    mean_loss = loss_mean_sum / state.steps_since_log
    now = time.perf_counter()
    tok_s = state.tokens_in_log / max(now - state.t_log - state.paused, 1e-9)
    per_dev = tok_s / strategy.num_processes
    grad_norm = state.grad_norm
    row = {
        "kind": "train", "step": step, "epoch": round(parts.batches.epoch_of(state.pos), 4),
        "loss": mean_loss, "lr": parts.scheduler.get_last_lr()[0],
        "grad_norm": float(grad_norm) if grad_norm is not None else None,
        "tokens_per_s": tok_s, "tokens_per_s_per_device": per_dev, "tokens": state.tokens_in_log,
        "mfu": mfu(per_dev, parts.flops_tok, parts.peak), "samples_seen": state.pos.samples_seen,
        "time": time.time(),
    }
    if torch.cuda.is_available():
        # The peak since the last log row (compile's and evaluation's peaks are not the step's).
        row["peak_mem_gb"] = torch.cuda.max_memory_allocated() / 1e9
        torch.cuda.reset_peak_memory_stats()
    parts.metrics.log(row)
    parts.progress.update(step, {"loss": mean_loss, "tok/s": tok_s, "mfu": row["mfu"]})
    state.loss_sum.zero_()
    state.tok_s, state.steps_since_log, state.t_log, state.steps_at_log = tok_s, 0, now, step
    state.tokens_in_log = 0.0
    state.paused = 0.0


def run_eval(parts: LoopParts, state: LoopState) -> None:
    """Evaluate at the current step: a metrics row, the progress bar, ``state.evals`` and
    ``state.last_eval``."""
    t = parts.recipe.train
    t0 = time.perf_counter()
    with parts.hold_watchdog():  # an evaluation may take longer than a step
        res = evaluate(parts.model, parts.eval_arrays, parts.recipe.task, t.eval_batch_size or t.batch_size,
                       parts.strategy, parts.metric_fns, parts.kept)
        if parts.generation_check is not None:
            res.update(parts.generation_check(parts.model))
    state.paused += time.perf_counter() - t0
    parts.metrics.log({"kind": "eval", "step": state.step, **res, "time": time.time()})
    state.evals.append({"step": state.step, **res})
    parts.progress.evaluated(state.step, res)  # the bar shows the newest evaluation from now on
    state.last_eval = res


def save_checkpoint(parts: LoopParts, state: LoopState) -> None:
    """A checkpoint of the current step, unless the state diverged (then DivergedError)."""
    strategy, at = parts.strategy, state.step
    # The partial loss sum averaged over ranks (a collective: every rank is here), so a
    # resume at any world size continues the same log interval.
    partial, norm, finite = _finite_check(strategy, state.loss_sum, state.checked_norm, parts.model)
    if not finite:  # never seal a diverged state
        raise diverged(parts.recipe, at, partial, norm,
                       "loss, gradient norm or weights checked before sealing a checkpoint")
    meta = {"position": state.pos.to_dict(), "loss_since_log": partial,
            "steps_since_log": state.steps_since_log, "total_steps": parts.steps}
    # Every rank writes its part (shards under FSDP/ZeRO); the main process seals it.
    t0 = time.perf_counter()
    with parts.hold_watchdog():
        ckpt.save_distributed(parts.paths, at, strategy, parts.model, parts.optimizer, parts.scheduler, meta,
                              parts.recipe_yaml, parts.recipe.train.keep_last)
    state.paused += time.perf_counter() - t0
    parts.progress.note(f"checkpoint {parts.paths.checkpoint(at).name} written ({time.perf_counter() - t0:.1f}s)")
    state.last_save = time.perf_counter()
    state.saved_at = at


def save_due(parts: LoopParts, state: LoopState) -> bool:
    """``train.save_every_minutes`` of training since the last checkpoint (or the start),
    looked at on log steps; every rank takes part and they agree (any rank's clock)."""
    t, strategy = parts.recipe.train, parts.strategy
    if not t.save_every_minutes or state.step % t.log_every != 0:
        return False
    due = time.perf_counter() - state.last_save >= 60 * t.save_every_minutes
    if strategy.num_processes == 1:
        return due
    flag = torch.tensor([1.0 if due else 0.0], device=strategy.device)
    return bool(strategy.reduce(flag, reduction="sum").item() > 0)


def stop_requested(stop: Any, strategy: Strategy, step: int, log_every: int) -> bool:
    """Whether a stop request ends the loop after ``step``. Stop requests are agreed at log steps
    only: the all-reduce is a sync point too. One process needs no agreement and stops at the
    next step boundary."""
    if strategy.num_processes == 1:
        return bool(stop.local())
    return step % log_every == 0 and bool(stop.agreed(strategy))


def train_loop(
    recipe: Recipe,
    model: torch.nn.Module,
    train_arrays: Arrays,
    eval_arrays: Arrays,
    paths: RunPaths,
    strategy: Strategy,
    recipe_yaml: str,
    resume_from: Any = None,
    show_progress: bool = True,
    stop: Any = None,
) -> LoopResult:
    """Train to ``train.max_steps`` (or the epochs); ``stop`` (a StopFlag) ends it early at an
    agreed step with a checkpoint, as a preempted or time-limited job needs."""
    t = recipe.train
    main = strategy.is_main_process
    batches = make_train_batches(
        train_arrays, t.batch_size, t.gradient_accumulation_steps,
        strategy.process_index, strategy.num_processes, t.seed, t.shuffle, groups_by_length(recipe),
    )
    steps = total_steps(recipe, batches.steps_per_epoch)
    seq_len = batches.seq_len
    flops_tok = flops_per_token(model, seq_len)  # before sharding: parameters counted whole
    # SFT: logits for the trained positions only (a hook on the bare model's output layer).
    task = task_of(recipe.task)
    kept = TrainedPositions(model, fused=t.fused_loss) if task.loss_on_trained_tokens else None
    model, optimizer, scheduler = strategy.prepare(
        model, lambda m: make_optimizer(recipe, m), RecipeSchedule(recipe, steps))
    metrics = MetricsWriter(paths.metrics, strategy.accelerator, main)
    peak = device_peak_flops(t.peak_flops)
    rank = strategy.process_index
    generation_check = make_generation_check(recipe, eval_arrays, paths.tokenizer, strategy)
    metric_fns = metric_functions(t.metrics, getattr(strategy.unwrap(model).config, "num_labels", 2))
    eval_every = eval_interval(recipe, batches.steps_per_epoch)

    state = LoopState(step=0, pos=Position(), loss_sum=torch.zeros((), device=strategy.device))
    resumed_step = None
    if resume_from is not None:
        resume(state, resume_from, strategy, model, optimizer, scheduler, paths)
        resumed_step = state.step

    progress = Progress(steps, state.step, enabled=main, show=show_progress)
    parts = LoopParts(
        recipe=recipe, strategy=strategy, model=model, optimizer=optimizer, scheduler=scheduler, steps=steps,
        batches=batches, paths=paths, recipe_yaml=recipe_yaml, metrics=metrics,
        progress=progress, eval_arrays=eval_arrays,
        task=task, kept=kept, metric_fns=metric_fns, generation_check=generation_check,
        hold_watchdog=stop.paused if stop is not None else contextlib.nullcontext,
        scaled_loss=getattr(getattr(strategy, "accelerator", None), "mixed_precision", "no") == "fp16",
        flops_tok=flops_tok, peak=peak,
    )
    state.last_save = time.perf_counter()
    stopped_by = None
    it = None
    try:
        if state.step == 0 and t.eval_at_start:
            run_eval(parts, state)
        model.train()
        t_start = state.t_log = time.perf_counter()
        state.paused = 0.0  # an evaluation at the start came before t_log: not part of the first interval
        state.steps_at_log = state.step
        it = batches.iterate(state.pos, strategy.device)
        progress.started()
        startup.release()  # the process's start is over: one collection, the collector on again
        probe_at = state.step + 1  # this attempt's first step: what each rank holds, recorded once
        while state.step < steps:
            micro_batches, next_pos = next(it)
            step_tokens = batches.step_tokens  # real tokens: padding is not work done (read before the next step)
            held = train_step(parts, state, micro_batches, probe=state.step + 1 == probe_at)
            state.step, state.pos = state.step + 1, next_pos
            state.tokens_in_log += step_tokens
            progress.advance(state.step)  # host-side only: the bar and its ETA move every step
            if held is not None:
                record_state_memory(parts, state.step, *held)
            state.steps_since_log += 1
            if stop is not None:
                stop.beat()  # the hang watchdog counts from the last step (armed by the first)

            if state.step % t.log_every == 0 or state.step == steps:
                log_train_row(parts, state)
            if eval_every and state.step % eval_every == 0 and state.step != steps:
                run_eval(parts, state)
            if state.step != steps and ((t.save_every and state.step % t.save_every == 0) or save_due(parts, state)):
                save_checkpoint(parts, state)

            if stop is not None and state.step != steps and stop_requested(stop, strategy, state.step, t.log_every):
                if state.saved_at != state.step:
                    save_checkpoint(parts, state)
                stopped_by = stop.requested_by or "another rank"
                log.info("stop request (%s): checkpoint at step %d written; stopping", stopped_by, state.step)
                break
            faults.point("step", state.step, rank)

        train_seconds = time.perf_counter() - t_start
        if stopped_by is None:
            run_eval(parts, state)
    finally:
        if it is not None:
            it.close()  # a prefetching thread ends with the loop, not at interpreter exit
        progress.close()
        if kept is not None:
            kept.remove()
    return LoopResult(
        steps=state.step, final_eval=state.last_eval, tokens_per_s=state.tok_s, samples_seen=state.pos.samples_seen,
        train_seconds=train_seconds, resumed_from_step=resumed_step, evals=state.evals, model=model,
        stopped_by=stopped_by,
    )
