"""PPO through TRL's PPOTrainer on CPU, and stop requests (signals, the stop file) in RL runs.

The reward model is a prose-vs-code classifier that clustertune's classification task trained
from the tiny policy itself (so it shares the policy's tokenizer, as TRL's PPO needs); the reward
is its probability of "code", which the starting policy's completions rarely earn (about 0.07).
Measured here: 40 PPO steps raise it to about 0.8 on the 64 evaluation prompts, far beyond the
noise; the test asks for a tripling and five standard errors.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import ModelError, RunError
from clustertune.runs.paths import STOP_FILE
from clustertune.recipe import dump_recipe
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.train import checkpoint as ckpt
from clustertune.runs.metrics_file import read_metrics
from clustertune.train.rl import execute_rl, preflight_rl
from clustertune.train.stop import StopFlag
from tests.helpers import read_jsonl
from tests.rl_fixtures import grpo_recipe


def ppo_recipe(policy: Run, reward: Run, runs_root: Path) -> dict:
    recipe = grpo_recipe(str(policy.paths.model), runs_root, algorithm="ppo",
                         rewards=[{"model": f"run:{reward.id}", "label": 1}], beta=0.01)
    recipe["train"].update(max_steps=40, log_every=10, save_every=20, lr=2e-3, lr_scheduler="constant")
    recipe["data"]["max_eval_samples"] = 64
    return recipe


def test_ppo_trains_with_a_reward_model_from_the_classification_task(tiny_policy_run: Run, policy_reward_model_run: Run,
                                                                     rl_runs_root: Path) -> None:
    from safetensors.torch import load_file
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from transformers import AutoModelForCausalLM

    recipe = ppo_recipe(tiny_policy_run, policy_reward_model_run, rl_runs_root)
    recipe["tracking"]["trackers"] = ["tensorboard"]
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED
    rows = read_jsonl(run.paths.metrics)
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [10, 20, 30, 40]  # PPO logs every step; log_every keeps these
    for r in train:
        for key in ("loss", "reward_mean", "kl", "policy_loss", "value_loss", "tokens_per_s", "lr"):
            assert isinstance(r[key], float), (key, r)
        assert 0.0 < r["reward_mean"] < 1.0 and r["tokens_per_s"] > 0 and r["value_loss"] >= 0.0
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [e["step"] for e in evals] == [0, 40]
    # The reward model's score of the policy's completions rises, by many standard errors.
    first, last = evals
    se = math.hypot(first["eval_reward_stderr"], last["eval_reward_stderr"])
    assert last["eval_reward"] - first["eval_reward"] > 5 * se and last["eval_reward"] > 3 * first["eval_reward"], evals
    # Checkpoints adopted into the run's atomic layout, with the value model's state beside the policy.
    found = ckpt.list_checkpoints(run.paths)
    assert [p.name for p in found] == ["step-00000020", "step-00000040"]
    state = ckpt.verify_checkpoint(found[-1])
    assert state["kind"] == "trl" and state["algorithm"] == "ppo" and "optimizer.pt" in state["files"]
    # The final model is the policy alone (not the value model), it loads and it moved.
    policy = AutoModelForCausalLM.from_pretrained(run.paths.model)
    assert type(policy).__name__ == "GPT2LMHeadModel"
    before = load_file(str(tiny_policy_run.paths.model / "model.safetensors"))
    after = load_file(str(run.paths.model / "model.safetensors"))
    moved = max((after[k].float() - before[k].float()).abs().max().item() for k in before)
    assert moved > 1e-3, moved
    # The tensorboard tracker got the same rows (reused from supervised runs).
    (events_dir,) = [p for p in run.paths.trackers.iterdir() if p.is_dir()]
    acc = EventAccumulator(str(events_dir))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/reward_mean", "train/kl", "train/policy_loss", "train/value_loss", "eval/eval_reward"} <= tags
    assert [e.step for e in acc.Scalars("train/reward_mean")] == [10, 20, 30, 40]
    # TRL's PPOTrainer has no resume: a typed error naming the checkpoint to start from instead.
    with pytest.raises(RunError, match="PPOTrainer cannot resume") as ei:
        execute_rl(ct.load_recipe(run.paths.recipe), run.paths, found[-1], False)
    assert str(found[-1]) in str(ei.value)


def test_ppo_stop_request_checkpoints_and_ends_the_loop(tiny_policy_run: Run, policy_reward_model_run: Run,
                                                        rl_runs_root: Path) -> None:
    recipe = ct.load_recipe(ppo_recipe(tiny_policy_run, policy_reward_model_run, rl_runs_root),
                            ["train.save_every=null", "train.log_every=2"])
    run = Run.create(rl_runs_root, "ppostop", recipe.task, dump_recipe(recipe), ["test"])
    stop_file = run.paths.root / STOP_FILE
    stop_file.write_text("USR2\n")  # what SLURM's batch shell writes on the time-limit signal
    result = execute_rl(recipe, run.paths, None, False, stop=StopFlag(stop_file, install_handlers=False))
    # PPO's own loop has no stop hook: the checkpoint of the first log step is written, then it ends.
    assert (result.steps, result.stopped_by) == (2, "SIGUSR2 via stop-request")
    assert [p.name for p in ckpt.list_checkpoints(run.paths)] == ["step-00000002"]
    assert not run.paths.model.exists()


def test_ppo_reward_model_must_share_the_policy_tokenizer(tiny_policy_run: Run, tiny_classifier_run: Run,
                                                          rl_runs_root: Path) -> None:
    recipe = ppo_recipe(tiny_policy_run, tiny_classifier_run, rl_runs_root)  # its own tokenizer
    with pytest.raises(ModelError) as ei:
        preflight_rl(ct.load_recipe(recipe))
    msg = str(ei.value)
    assert msg.startswith("rl.rewards.0.model:") and "another tokenizer than rl.policy" in msg
    assert "model.name_or_path: the policy directory" in msg


def test_sigterm_checkpoints_an_rl_run_and_resume_continues(tiny_policy_run: Run, rl_runs_root: Path) -> None:
    recipe = grpo_recipe(str(tiny_policy_run.paths.model), rl_runs_root)
    recipe["train"].update(max_steps=30, log_every=2)
    recipe["data"]["max_eval_samples"] = 8
    r = ct.load_recipe(recipe)
    run = Run.create(rl_runs_root, "grpostop", r.task, dump_recipe(r), ["test"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "clustertune.train.entry", str(run.paths.root)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        # read_metrics skips a line the writer has not finished yet
        while not any(row["kind"] == "train" for row in read_metrics(run.paths.metrics)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # what a preemption or scancel delivers to the process
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    run = run.reload()
    assert run.state is RunState.PREEMPTED and "SIGTERM" in run.info.reason
    (found,) = ckpt.list_checkpoints(run.paths)
    stopped_at = ckpt.verify_checkpoint(found)["step"]
    assert stopped_at % 2 == 0 and 2 <= stopped_at < 30 and not run.paths.model.exists()
    assert max(row["step"] for row in read_jsonl(run.paths.metrics)) == stopped_at
    resumed = ct.run(resume=run.id, runs_root_dir=rl_runs_root, show_progress=False)
    assert resumed.state is RunState.COMPLETED and resumed.attempts[-1].resumed_from == found.name
    steps = [row["step"] for row in read_jsonl(resumed.paths.metrics) if row["kind"] == "train"]
    assert steps == list(range(2, 31, 2))  # each log step once: before the stop, then after the resume
    assert (resumed.paths.model / "model.safetensors").is_file()
