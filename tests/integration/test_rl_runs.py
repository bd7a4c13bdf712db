"""RLHF runs end to end on CPU with real TRL trainers and tiny policies."""

from __future__ import annotations

import json
import math
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import clustertune as ct
from clustertune.recipe import dump_recipe
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.train import checkpoint as ckpt
from clustertune.train.rl.callbacks import samples_path
from tests.helpers import cli, read_jsonl
from tests.rl_fixtures import REWARD_E, dpo_recipe, grpo_recipe


def evals(run: Run) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"]


def test_grpo_raises_the_reward_and_saves_a_reloadable_policy(tiny_policy_run: Run, rl_runs_root: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    recipe = ct.load_recipe(grpo_recipe(f"run:{tiny_policy_run.id}", rl_runs_root, sample_every=20),
                            ["train.save_every=20"])
    run = ct.run(recipe, show_progress=False)
    assert run.state is RunState.COMPLETED
    rows = read_jsonl(run.paths.metrics)
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [10, 20, 30, 40]
    for r in train:
        for key in ("loss", "reward_mean", "reward_std", "kl", "lr", "tokens_per_s"):
            assert isinstance(r[key], float), (key, r)
        assert 0.0 <= r["reward_mean"] <= 1.0 and r["tokens_per_s"] > 0
    first, last = evals(run)[0], evals(run)[-1]
    assert (first["step"], last["step"]) == (0, 40)
    assert first["eval_samples"] == last["eval_samples"] == 64
    # The char_fraction reward of the tuned policy on the same 64 evaluation prompts: well above
    # the starting policy's, by many standard errors (it roughly triples in this setting).
    se = math.hypot(first["eval_reward_stderr"], last["eval_reward_stderr"])
    assert last["eval_reward"] - first["eval_reward"] > 5 * se
    assert last["eval_reward"] > 1.5 * first["eval_reward"]
    # Samples every 20 steps, with their rewards.
    samples = read_jsonl(samples_path(run.paths))
    assert {s["step"] for s in samples} == {20, 40}
    assert all(isinstance(s["completion"], str) and 0.0 <= s["reward"] <= 1.0 for s in samples)
    # Atomic, self-describing checkpoints that verify like supervised ones.
    found = ckpt.list_checkpoints(run.paths)
    assert [p.name for p in found] == ["step-00000020", "step-00000040"]
    state = ckpt.verify_checkpoint(found[-1])
    assert state["kind"] == "trl" and state["step"] == 40 and "trainer_state.json" in state["files"]
    assert not list(run.paths.checkpoints.glob(".tmp-*"))
    # The final policy reloads with from_pretrained and generates.
    model = AutoModelForCausalLM.from_pretrained(run.paths.model)
    tok = AutoTokenizer.from_pretrained(run.paths.model)
    out = model.generate(**tok("The return value", return_tensors="pt"), max_new_tokens=4, do_sample=False,
                         pad_token_id=tok.pad_token_id)
    assert out.shape[1] > 3
    summary = json.loads(run.paths.summary.read_text())
    assert summary["steps"] == 40 and summary["final_eval"]["eval_reward"] == last["eval_reward"]
    # The reward curve plots.
    res = cli("runs", "show", run.id, "--plot", "--runs-root", str(rl_runs_root))
    assert res.returncode == 0, res.stderr
    eval_line = next(line for line in res.stdout.splitlines() if line.startswith("eval @ 40"))
    assert f"reward {last['eval_reward']:.4f}" in eval_line
    assert run.paths.plot.stat().st_size > 1000


def test_dpo_on_generated_pairs_raises_the_held_out_margin(tiny_policy_run: Run, rl_runs_root: Path) -> None:
    run = ct.run(ct.load_recipe(dpo_recipe(str(tiny_policy_run.paths.model), rl_runs_root), ["train.max_steps=60"]),
                 show_progress=False)
    assert run.state is RunState.COMPLETED
    first, last = evals(run)[0], evals(run)[-1]
    assert first["eval_samples"] == last["eval_samples"] >= 100
    # Against the starting policy, the chosen-over-rejected margin of the held-out pairs grows
    # by many standard errors, for most pairs, and the raw margin and accuracy rise with it.
    assert first["eval_gain"] == 0.0
    assert last["eval_gain"] > 5 * last["eval_gain_stderr"] and last["eval_gain_accuracy"] > 0.75
    assert last["eval_margin"] > first["eval_margin"] and last["eval_accuracy"] > first["eval_accuracy"]
    train = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert train[-1]["preference_accuracy"] > 0.6 and train[-1]["loss"] < train[0]["loss"]


def test_resume_after_sigkill_continues_from_the_last_checkpoint(tiny_policy_run: Run, rl_runs_root: Path, tmp_path: Path) -> None:
    recipe = grpo_recipe(str(tiny_policy_run.paths.model), rl_runs_root)
    recipe["train"].update(max_steps=8, save_every=4, log_every=2)
    recipe["data"]["max_eval_samples"] = 8
    path = tmp_path / "grpo.yaml"
    path.write_text(dump_recipe(ct.load_recipe(recipe)))
    env = {"CLUSTERTUNE_FAULT_KILL_AT_STEP": "6"}
    res = cli("run", str(path), "--no-progress", "--runs-root", str(rl_runs_root), env=env)
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    run_id = next(line.split()[1] for line in res.stderr.splitlines() if line.startswith("run tinygrpo-"))[:-1]
    run = ct.get_run(run_id, rl_runs_root)
    assert run.state is RunState.FAILED  # reconciled: the process is gone
    assert [p.name for p in ckpt.list_checkpoints(run.paths)] == ["step-00000004"]
    run = ct.run(resume=run_id, runs_root_dir=rl_runs_root, show_progress=False)
    assert run.state is RunState.COMPLETED
    assert run.attempts[-1].resumed_from == "step-00000004"
    train_steps = [r["step"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert train_steps == [2, 4, 6, 8]  # rows of the killed attempt after step 4 were dropped
    assert [e["step"] for e in evals(run)] == [0, 8]
    assert json.loads(run.paths.summary.read_text())["resumed_from_step"] == 4
    # The same recipe never interrupted ends on the same policy: the checkpoint carried the RNG
    # states, optimizer and data position, so the resumed attempt drew the same samples.
    from safetensors.torch import load_file

    whole = ct.run(ct.load_recipe(path), runs_root_dir=rl_runs_root, show_progress=False)
    a, b = load_file(str(run.paths.model / "model.safetensors")), load_file(str(whole.paths.model / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    resumed_rows = [(r["step"], r["loss"], r["reward_mean"]) for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    whole_rows = [(r["step"], r["loss"], r["reward_mean"]) for r in read_jsonl(whole.paths.metrics) if r["kind"] == "train"]
    assert resumed_rows == whole_rows


def test_classifier_from_the_classification_task_as_reward(tiny_policy_run: Run, tiny_classifier_run: Run,
                                                           rl_runs_root: Path) -> None:
    rewards = [{"model": f"run:{tiny_classifier_run.id}", "label": 0, "weight": 1.0}]
    recipe = grpo_recipe(str(tiny_policy_run.paths.model), rl_runs_root, rewards=rewards)
    recipe["train"].update(max_steps=4, log_every=2)
    recipe["data"]["max_eval_samples"] = 16
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED
    train = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert len(train) == 2
    for r in train:  # the probability of label 0 ("prose") per completion
        assert 0.0 < r["reward_mean"] < 1.0 and r["reward_std"] > 0.0
    ev = evals(run)[-1]
    name = next(k for k in ev if k.startswith("eval_reward/"))
    assert name.endswith("[0]") and 0.0 < ev[name] < 1.0


def test_reward_that_raises_mid_run_fails_it_cleanly_with_a_checkpoint(tiny_policy_run: Run, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.errors import RewardError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "flaky_rewards.py").write_text(
        "calls = 0\n"
        "def flaky(prompts, completions):\n"
        "    global calls\n"
        "    calls += 1\n"
        "    if calls > 4:\n"
        "        raise KeyError('a column the user forgot')\n"
        "    return [0.5 + 0.01 * len(c) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    runs = tmp_path / "runs"
    recipe = grpo_recipe(str(tiny_policy_run.paths.model), runs, rewards=[{"function": "flaky_rewards:flaky"}])
    recipe["train"].update(max_steps=10, log_every=1)
    recipe["data"]["max_eval_samples"] = 8
    try:
        with pytest.raises(RewardError) as ei:
            ct.run(ct.load_recipe(recipe), show_progress=False)
    finally:
        sys.modules.pop("flaky_rewards", None)
    msg = str(ei.value)
    assert msg.startswith("reward function flaky_rewards:flaky raised:\nTraceback")
    assert "raise KeyError('a column the user forgot')" in msg and msg.count("Traceback") == 1
    (run,) = ct.list_runs(runs)
    assert run.state is RunState.FAILED and run.info.reason == msg
    # The last completed step is kept, so a fixed reward can continue with --resume.
    (found,) = ckpt.list_checkpoints(run.paths)
    state = ckpt.verify_checkpoint(found)
    done = [r["step"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert state["step"] == done[-1] >= 1


def test_rloo_with_a_named_reference_and_a_trlx_style_reward(tiny_policy_run: Run, rl_runs_root: Path,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reward function ported from a TRLX script as it was written there: samples are prompt + completion.
    (tmp_path / "trlx_rewards.py").write_text(
        "import json, os\n"
        "def reward_fn(samples, prompts, outputs, **kwargs):\n"
        "    with open(os.environ['TRLX_SEEN'], 'a') as f:\n"
        "        f.write(json.dumps([samples, prompts, outputs]) + '\\n')\n"
        "    return [s.count('e') / max(1, len(s)) for s in samples]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRLX_SEEN", str(tmp_path / "seen.jsonl"))
    policy = str(tiny_policy_run.paths.model)
    recipe = grpo_recipe(policy, rl_runs_root, algorithm="rloo", reference=f"run:{tiny_policy_run.id}",
                         rewards=[REWARD_E, {"function": "trlx_rewards:reward_fn"}])
    recipe["train"].update(max_steps=4, log_every=2)
    recipe["data"]["max_eval_samples"] = 16
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    train = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert [r["step"] for r in train] == [2, 4]
    assert all(isinstance(r["kl"], float) and r["kl"] >= 0.0 and isinstance(r["reward_mean"], float) for r in train)
    seen = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    assert seen and all(samples == [p + o for p, o in zip(prompts, outputs)] and len(samples) == len(prompts) > 0
                        for samples, prompts, outputs in seen)


def test_batched_completion_log_probs_equal_one_sequence_at_a_time(tiny_policy_run: Run) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clustertune.train.rl.evaluate import GEN_BATCH, sequence_logps
    from clustertune.train.rl.sources import builtin_rl_rows

    model = AutoModelForCausalLM.from_pretrained(tiny_policy_run.paths.model)
    tok = AutoTokenizer.from_pretrained(tiny_policy_run.paths.model)
    rows = builtin_rl_rows("pydoc-preferences", 0)[: GEN_BATCH + 5]  # two batches, sequences of many lengths
    prompts, completions = [r["prompt"] for r in rows], [r["rejected"] for r in rows]
    got = sequence_logps(model, tok, prompts, completions, max_prompt_tokens=16)
    want = []
    with torch.no_grad():
        for p, c in zip(prompts, completions):
            p_ids = tok(p, add_special_tokens=False)["input_ids"][:16]
            c_ids = tok(c, add_special_tokens=False)["input_ids"][:16]
            logits = model(input_ids=torch.tensor([p_ids + c_ids])).logits[0].float().log_softmax(-1)
            want.append(sum(logits[len(p_ids) - 1 + i, t].item() for i, t in enumerate(c_ids)))
    assert len({len(tok(c)["input_ids"]) for c in completions}) > 3  # padding really was exercised
    assert got.tolist() == pytest.approx(want, abs=1e-3)
