"""The seam between TRL's loop and the run: metrics, evaluations, samples, checkpoints.

TRL's trainers keep their own loop; this callback turns what they log into clustertune's
``metrics.jsonl`` rows (mean reward, reward spread, KL, loss, tokens/s), measures the policy
before, during and after training, writes sample generations, and adopts every checkpoint the
trainer saves into the run's atomic, self-describing layout.
"""

from __future__ import annotations

import contextlib

import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from clustertune.recipe.rl_recipe import RLRecipe
from clustertune.runs.paths import RunPaths
from clustertune.train.loop import KILL_AT_STEP_ENV
from clustertune.train.metrics import MetricsWriter
from clustertune.train.progress import Progress
from clustertune.train.rl import evaluate
from clustertune.train.rl.checkpoints import adopt_checkpoint
from clustertune.train.rl.rewards import Reward, total_reward

log = logging.getLogger("clustertune")

SAMPLES_FILE = "samples.jsonl"
BASELINE_FILE = "eval_baseline.json"

# TRL log keys -> metrics.jsonl names (the rest are kept under their TRL names).
RENAMES = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "kl": "kl",
    # PPO's own names: the reward model's score, KL to the reference, the two losses.
    "objective/scores": "reward_mean",
    "objective/kl": "kl",
    "loss/policy_avg": "policy_loss",
    "loss/value_avg": "value_loss",
    "learning_rate": "lr",
    "completions/mean_length": "completion_tokens",
    "rewards/accuracies": "preference_accuracy",
    "rewards/margins": "reward_margin",
}


class StopRequested(Exception):
    """Raised from the callback once a stop request's checkpoint is written: it ends TRL's loop
    (PPO's loop has no other way out) without a final evaluation or a final model."""

    def __init__(self, step: int, by: str):
        super().__init__(f"stop request ({by}) at step {step}")
        self.step, self.by = step, by


def samples_path(paths: RunPaths) -> Path:
    return paths.root / SAMPLES_FILE


@dataclass
class EvalSet:
    """What the policy is measured on: prompts (GRPO/RLOO), held-out pairs (DPO, KTO on pairs)
    or held-out completions marked desirable or not (KTO)."""

    prompts: list[str] = field(default_factory=list)
    pairs: dict[str, list[str]] | None = None
    labelled: dict[str, list[Any]] | None = None  # prompt, completion, label


class RunCallback(TrainerCallback):  # type: ignore[misc]
    def __init__(self, recipe: RLRecipe, paths: RunPaths, tokenizer: Any, rewards: list[Reward], eval_set: EvalSet,
                 recipe_yaml: str, show_progress: bool, resumed: bool, stop: Any = None):
        rl = recipe.rl
        self.recipe, self.rl, self.paths, self.tok = recipe, rl, paths, tokenizer
        self.rewards, self.eval_set, self.recipe_yaml = rewards, eval_set, recipe_yaml
        self.show_progress, self.resumed = show_progress, resumed
        self.stop = stop  # a StopFlag (signals, stop file) on the node side; None in-process
        self.stopped_by: str | None = None
        self.trainer: Any = None  # set by the runner once the trainer exists
        self.metrics: MetricsWriter | None = None
        self.progress: Progress | None = None
        self.evals: list[dict[str, Any]] = []
        self.kill_at = int(os.environ.get(KILL_AT_STEP_ENV, "0") or 0)
        self._t_log = time.perf_counter()
        self._tokens_at_log: float | None = None
        self.train_seconds = 0.0
        self._t_start = 0.0

    # -- helpers ---------------------------------------------------------------------------

    @property
    def main(self) -> bool:
        return bool(self.trainer is None or self.trainer.accelerator.is_main_process)

    def _barrier(self) -> None:
        if self.trainer is not None:
            self.trainer.accelerator.wait_for_everyone()

    def evaluate(self, model: Any, step: int) -> dict[str, Any]:
        """Measure the policy and log an eval row (main process only)."""
        if not self.main:
            return {}
        model = _policy(model)
        rl = self.rl
        if self.eval_set.pairs is not None or self.eval_set.labelled is not None:
            base_file = self.paths.root / BASELINE_FILE
            baseline = json.loads(base_file.read_text()) if base_file.is_file() else None
            if self.eval_set.pairs is not None:
                res, logps = evaluate.preference_stats(model, self.tok, self.eval_set.pairs, rl.max_prompt_tokens,
                                                       baseline)
            else:
                res, logps = evaluate.label_stats(model, self.tok, self.eval_set.labelled, rl.max_prompt_tokens,
                                                  baseline)
            if baseline is None:  # the starting policy's log-probs: what later margins are compared with
                base_file.write_text(json.dumps(logps), encoding="utf-8")
        else:
            comps = evaluate.generate(model, self.tok, self.eval_set.prompts, max_new_tokens=rl.max_new_tokens,
                                      temperature=rl.temperature, top_p=rl.top_p,
                                      max_prompt_tokens=rl.max_prompt_tokens, seed=self.recipe.train.seed)
            res = evaluate.reward_stats(self.rewards, self.eval_set.prompts, comps)
        assert self.metrics is not None
        self.metrics.log({"kind": "eval", "step": step, **res, "time": time.time()})
        self.evals.append({"step": step, **res})
        if self.progress is not None:
            shown = {k: v for k, v in res.items() if "/" not in k and not k.endswith(("_std", "_stderr"))}
            self.progress.evaluated(step, shown, f"eval @ step {step}: " + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()))
        return res

    def write_samples(self, model: Any, step: int) -> None:
        if not self.main or not self.eval_set.prompts:
            return
        model = _policy(model)
        rl = self.rl
        prompts = self.eval_set.prompts[: rl.num_samples]
        comps = evaluate.generate(model, self.tok, prompts, max_new_tokens=rl.max_new_tokens, temperature=rl.temperature,
                                  top_p=rl.top_p, max_prompt_tokens=rl.max_prompt_tokens, seed=self.recipe.train.seed + step)
        scores = total_reward(self.rewards, prompts, comps)
        with samples_path(self.paths).open("a", encoding="utf-8") as fh:
            for p, c, s in zip(prompts, comps, scores):
                fh.write(json.dumps({"step": step, "prompt": p, "completion": c, "reward": s}) + "\n")

    # -- TrainerCallback hooks -------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        acc = self.trainer.accelerator if self.trainer is not None else None
        self.metrics = MetricsWriter(self.paths.metrics, acc, self.main)
        self.progress = Progress(state.max_steps, state.global_step, enabled=self.main and self.show_progress)
        if state.global_step == 0 and not self.resumed:
            self.evaluate(model, 0)
        self._t_start = self._t_log = time.perf_counter()
        self._tokens_at_log = 0.0
        if self.progress is not None:
            self.progress.started()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        logs = dict(logs or {})
        if self.metrics is None or not ("loss" in logs or "loss/policy_avg" in logs):
            return  # the end-of-training summary has train_loss only
        step = state.global_step
        if step % self.recipe.train.log_every and step != state.max_steps:
            return  # PPO logs every step; the recipe's log_every decides what is kept
        if "loss" not in logs:  # PPO: what it minimises, the clipped policy loss plus the weighted value loss
            logs["loss"] = logs["loss/policy_avg"] + args.vf_coef * logs["loss/value_avg"]
        now = time.perf_counter()
        tokens = logs.get("num_tokens")
        if tokens is None and "episode" in logs:  # PPO counts rollouts: each generates max_new_tokens
            tokens = logs["episode"] * self.rl.max_new_tokens
        tok_s = None
        if isinstance(tokens, (int, float)) and self._tokens_at_log is not None and tokens >= self._tokens_at_log:
            tok_s = (tokens - self._tokens_at_log) / max(now - self._t_log, 1e-9)
        if isinstance(tokens, (int, float)):
            self._tokens_at_log = tokens
        self._t_log = now
        row: dict[str, Any] = {"kind": "train", "step": state.global_step, "loss": float(logs.pop("loss"))}
        for k, v in logs.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[RENAMES.get(k, k)] = float(v)
        row["tokens_per_s"] = tok_s
        row["time"] = time.time()
        self.metrics.log(row)
        if self.progress is not None:
            shown = {k: row.get(k) for k in ("loss", "reward_mean", "reward_std", "kl", "preference_accuracy")}
            self.progress.update(state.global_step, {**shown, "tok/s": tok_s})

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.stop is not None:
            self.stop.release()  # watched again after the evaluation or checkpoint that followed a step

    def _watch_off(self) -> Any:
        """The hang watchdog held off for a block of our own (samples, an evaluation)."""
        return self.stop.paused() if self.stop is not None else contextlib.nullcontext()

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        step = state.global_step
        if self.progress is not None:
            self.progress.advance(step)  # host-side only: the bar moves every step
        sample_every = self.rl.sample_every or self.recipe.train.log_every
        every = self.recipe.train.eval_every
        sampling = step % sample_every == 0
        evaluating = isinstance(every, int) and step % every == 0 and step != state.max_steps
        if sampling or evaluating:
            with self._watch_off():  # generating and evaluating take longer than a step; they are not a hang
                if sampling:
                    self.write_samples(model, step)
                if evaluating:
                    self.evaluate(model, step)
        if self.kill_at and step == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # fault injection for the resume tests
        if self.stop is not None:
            self.stop.beat()  # the hang watchdog counts from the last step
            # Agreed at log steps only (an all-reduce, so every rank asks at the same step); the
            # trainer then saves this step's checkpoint and on_save ends the loop.
            if step % self.recipe.train.log_every == 0 and step != state.max_steps and self.stop.agreed(self.trainer.accelerator):
                self.stopped_by = self.stop.requested_by or "another rank"
                control.should_save = True
            if control.should_save or control.should_evaluate:
                # The trainer evaluates and saves after this hook, before the next step begins.
                self.stop.hold()

    def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        if self.recipe.train.eval_every == "epoch" and state.global_step != state.max_steps:
            with self._watch_off():
                self.evaluate(model, state.global_step)

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.adopt(state.global_step, Path(args.output_dir) / f"checkpoint-{state.global_step}", state.max_steps)
        if self.stopped_by is not None:
            raise StopRequested(state.global_step, self.stopped_by)

    def adopt(self, step: int, src: Path, total_steps: int) -> None:
        """Every rank has written its part (RNG states per rank); then the main process adopts it."""
        self._barrier()
        if self.main and src.is_dir():
            dst = adopt_checkpoint(self.paths, src, step, {"algorithm": self.rl.algorithm, "total_steps": total_steps},
                                   self.recipe_yaml, self.recipe.train.keep_last)
            log.info("checkpoint %s", dst.name)
        self._barrier()

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        self.train_seconds = time.perf_counter() - self._t_start
        if self.progress is not None:
            self.progress.close()
        with self._watch_off():
            self.evaluate(model, state.global_step)


def _policy(model: Any) -> Any:
    """The policy inside what a trainer hands its callbacks (PPO: a policy-and-value wrapper)."""
    return getattr(model, "policy", model)
