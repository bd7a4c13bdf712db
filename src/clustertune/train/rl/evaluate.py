"""Measuring a policy: mean reward of sampled completions, and preference margins on pairs.

Both run on the main process with the unwrapped model. Sampling uses a forked RNG seeded from
the recipe, so the before/after comparison samples with the same seed and evaluation never
shifts the training's random stream (a resumed run stays on the same path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from clustertune.train.rl.rewards import Reward

GEN_BATCH = 32


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompts: Sequence[str], *, max_new_tokens: int, temperature: float,
             top_p: float, max_prompt_tokens: int, seed: int) -> list[str]:
    """One sampled completion per prompt (text after the prompt, special tokens dropped)."""
    was_training = model.training
    model.eval()
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # decoder-only models continue from the last position
    out: list[str] = []
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for i in range(0, len(prompts), GEN_BATCH):
                chunk = list(prompts[i:i + GEN_BATCH])
                enc = tokenizer(chunk, return_tensors="pt", padding=True, truncation=True,
                                max_length=max_prompt_tokens, add_special_tokens=False).to(model.device)
                ids = model.generate(**enc, do_sample=True, temperature=temperature, top_p=top_p,
                                     max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
                new = ids[:, enc["input_ids"].shape[1]:]
                out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return out


def reward_stats(rewards: Sequence[Reward], prompts: Sequence[str], completions: Sequence[str]) -> dict[str, float]:
    """Mean, spread and standard error of the weighted reward, plus each reward's mean."""
    total = [0.0] * len(completions)
    row: dict[str, float] = {}
    for r in rewards:
        scores = r.score(prompts, completions)
        row[f"eval_reward/{r.name}"] = sum(scores) / len(scores)
        for j, s in enumerate(scores):
            total[j] += r.weight * s
    n = len(total)
    mean = sum(total) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in total) / (n - 1)) if n > 1 else 0.0
    return {"eval_reward": mean, "eval_reward_std": std, "eval_reward_stderr": std / math.sqrt(n), "eval_samples": n, **row}


@torch.no_grad()
def sequence_logps(model: Any, tokenizer: Any, prompts: Sequence[str], completions: Sequence[str], max_prompt_tokens: int) -> torch.Tensor:
    """Sum of log-probabilities of each completion's tokens given its prompt.

    Batched, right-padded: padding sits after each sequence's last token, so it changes neither
    the positions nor the attention of the real tokens (one pass per GEN_BATCH pairs instead of
    one per sequence: the held-out evaluation of a DPO run was most of its time).
    """
    was_training = model.training
    model.eval()
    rows = []
    for p, c in zip(prompts, completions):
        p_ids = tokenizer(p, add_special_tokens=False)["input_ids"][:max_prompt_tokens]
        c_ids = tokenizer(c, add_special_tokens=False)["input_ids"][:max_prompt_tokens]
        rows.append((p_ids, c_ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = []
    try:
        for i in range(0, len(rows), GEN_BATCH):
            chunk = rows[i:i + GEN_BATCH]
            width = max(len(p) + len(c) for p, c in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            scored = torch.zeros((len(chunk), width - 1))  # 1 where position t predicts a completion token
            for j, (p, c) in enumerate(chunk):
                n = len(p) + len(c)
                ids[j, :n] = torch.tensor(p + c)
                attention[j, :n] = 1
                scored[j, len(p) - 1:n - 1] = 1.0
            ids, attention, scored = ids.to(model.device), attention.to(model.device), scored.to(model.device)
            logits = model(input_ids=ids, attention_mask=attention).logits.float()[:, :-1]
            logp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
            out.append((logp * scored).sum(-1))
    finally:
        model.train(was_training)
    return torch.cat(out)


def preference_stats(model: Any, tokenizer: Any, pairs: dict[str, list[str]], max_prompt_tokens: int,
                     baseline: dict[str, list[float]] | None) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Held-out pairs: how much more likely the policy makes each chosen completion than its rejected one.

    ``eval_margin``/``eval_accuracy``: the policy's own log-probability margin and how often it
    is positive. Raw margins vary a lot between pairs (lengths, rare words), so the run also
    reports them against ``baseline`` (the same pairs under the starting policy, as DPO's
    implicit reward does): ``eval_gain`` is the mean change of the margin since the start and
    ``eval_gain_accuracy`` how often it grew. Returns the figures and this evaluation's log-probs.
    """
    chosen = sequence_logps(model, tokenizer, pairs["prompt"], pairs["chosen"], max_prompt_tokens)
    rejected = sequence_logps(model, tokenizer, pairs["prompt"], pairs["rejected"], max_prompt_tokens)
    margin = chosen - rejected
    n = margin.numel()
    res = {"eval_margin": margin.mean().item(), "eval_margin_stderr": _stderr(margin),
           "eval_accuracy": (margin > 0).float().mean().item(), "eval_logp_chosen": chosen.mean().item(),
           "eval_logp_rejected": rejected.mean().item(), "eval_samples": n}
    logps = {"chosen": chosen.tolist(), "rejected": rejected.tolist()}
    base = baseline or logps  # the first evaluation is its own baseline: gain 0
    gain = margin - (torch.tensor(base["chosen"]) - torch.tensor(base["rejected"]))
    res.update({"eval_gain": gain.mean().item(), "eval_gain_stderr": _stderr(gain),
                "eval_gain_accuracy": (gain > 0).float().mean().item()})
    return res, logps


def label_stats(model: Any, tokenizer: Any, rows: dict[str, list[Any]], max_prompt_tokens: int,
                baseline: dict[str, list[float]] | None) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Held-out completions marked desirable or not (KTO's data): how far the policy moved each
    one's log-probability since the start (``baseline``), desirable ones up, the others down.

    ``eval_gain``: mean change of the desirable ones minus mean change of the others;
    ``eval_gain_accuracy``: how often a completion moved the way its label asks. Returns the
    figures and this evaluation's log-probs."""
    logp = sequence_logps(model, tokenizer, rows["prompt"], rows["completion"], max_prompt_tokens)
    good = torch.tensor([bool(v) for v in rows["label"]])
    base = torch.tensor((baseline or {"logp": logp.tolist()})["logp"])
    moved = logp - base
    sign = torch.where(good, 1.0, -1.0)
    up, down = moved[good], moved[~good]
    gain = (up.mean() if up.numel() else torch.tensor(0.0)) - (down.mean() if down.numel() else torch.tensor(0.0))
    res = {"eval_gain": gain.item(), "eval_gain_stderr": _stderr(moved * sign),
           "eval_gain_accuracy": (moved * sign > 0).float().mean().item() if baseline else 0.0,
           "eval_logp_desirable": logp[good].mean().item() if up.numel() else float("nan"),
           "eval_logp_undesirable": logp[~good].mean().item() if down.numel() else float("nan"),
           "eval_samples": logp.numel()}
    return res, {"logp": logp.tolist()}


def _stderr(x: torch.Tensor) -> float:
    return x.std().item() / math.sqrt(x.numel()) if x.numel() > 1 else 0.0
