"""The curves of an RL run: reward (train batches and evaluations) beside loss and KL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clustertune.runs.run import Run


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pts = [(int(r["step"]), float(r[key])) for r in rows if isinstance(r.get(key), (int, float))]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_rl(run: Run, train: list[dict[str, Any]], evals: list[dict[str, Any]], plt: Any, target: Path) -> Path:
    """Left: mean reward per step (GRPO/RLOO) or preference accuracy (DPO), with the evaluation
    points and their standard errors. Right: policy loss and KL to the reference."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    pairs = any("eval_margin" in r for r in evals)
    labelled = not pairs and any("eval_gain" in r for r in evals)  # KTO on completions marked desirable or not
    train_key, eval_key, err_key, label = (
        ("preference_accuracy", "eval_accuracy", None, "preference accuracy") if pairs
        else ("rewards/margins", "eval_gain", "eval_gain_stderr", "log-prob gain (desirable - not)") if labelled
        else ("reward_mean", "eval_reward", "eval_reward_stderr", "mean reward"))
    xs, ys = _series(train, train_key)
    ax.plot(xs, ys, label=f"train {label}")
    ex, ey = _series(evals, eval_key)
    errs = [float(r.get(err_key) or 0.0) for r in evals if isinstance(r.get(eval_key), (int, float))] if err_key else None
    ax.errorbar(ex, ey, yerr=errs, fmt="o-", capsize=3, label=f"eval {label}")
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    ax.legend()
    ax.set_title(run.id, fontsize=9)
    lx, ly = _series(train, "loss")
    ax2.plot(lx, ly, label="loss")
    kx, ky = _series(train, "kl")
    if kx:
        ax2.plot(kx, ky, label="KL")
    ax2.set_xlabel("step")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
