"""Summaries of runs for people: list rows, the show text, curves as a PNG, log following."""

from __future__ import annotations

import json
import shlex

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.recipe.task_traits import traits_of
from clustertune.runs.paths import checkpoint_step
from clustertune.runs.run import Run
from clustertune.runs.evals import eval_lines
from clustertune.runs.metrics_file import read_metrics
from clustertune.runs.report_rl import plot_rl


def _to_the_second(iso: str) -> str:
    """A time as people read it: no fractions of a second (runs keep them to order by)."""
    try:
        return datetime.fromisoformat(iso).isoformat(timespec="seconds")
    except ValueError:
        return iso


def age(iso: str | None) -> str:
    if not iso:
        return "?"
    secs = (datetime.now(timezone.utc) - datetime.fromisoformat(iso)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit}"
    return f"{int(secs)}s"


def best_eval(rows: list[dict[str, Any]]) -> tuple[str, float] | None:
    """Best evaluation figure: highest accuracy, else lowest perplexity, else lowest loss."""
    evals = [r for r in rows if r.get("kind") == "eval"]
    for key, pick in (("eval_exact_match", max), ("eval_accuracy", max), ("eval_reward", max), ("eval_perplexity", min),
                      ("eval_loss", min)):
        vals = [r[key] for r in evals if isinstance(r.get(key), (int, float))]
        if vals:
            return key.removeprefix("eval_"), pick(vals)
    return None


def generation_change(rows: list[dict[str, Any]]) -> str | None:
    """SFT's generation check from the first evaluation to the last (the untuned baseline beside
    the tuned score), or None when the run has none."""
    evals = [r for r in rows if r.get("kind") == "eval" and "eval_exact_match" in r]
    if not evals:
        return None
    a, b = evals[0], evals[-1]
    return (f"  held-out exact match {a['eval_exact_match']:.2f} (step {a['step']}) -> {b['eval_exact_match']:.2f} "
            f"(step {b['step']}); contains the reference {a['eval_contains']:.2f} -> {b['eval_contains']:.2f}")


def interrupted_text(run: Run) -> str:
    """What a user needs after Ctrl-C or a cancel: which checkpoint is kept, and how to go on."""
    how = "cancelled" if run.paths.cancel_request.is_file() else "interrupted"
    kept = run.paths.complete_checkpoints()
    if kept:
        return (f"run {run.id} {how}: checkpoint {kept[-1].name} is kept (steps after it are lost); "
                f"continue with `clustertune run --resume {run.id}`")
    return (f"run {run.id} {how} before its first checkpoint: `clustertune run --resume {run.id}` "
            "starts it again from step 0")


def _number(value: float) -> str:
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def final_lines(run: Run) -> list[str]:
    """The end of a finished run for the terminal: its headline evaluation figure from the first
    evaluation to the last, and the commands to look at it and use it."""
    evals = [r for r in read_metrics(run.paths.metrics) if r.get("kind") == "eval"]
    lines = []
    key = next((k for k in ("eval_accuracy", "eval_reward", "eval_perplexity", "eval_loss")
                if evals and isinstance(evals[-1].get(k), (int, float))), None)
    if key is not None:
        first, last = evals[0], evals[-1]
        change = f"{_number(first[key])} (step {first['step']}) -> " if first is not last and key in first else ""
        lines.append(f"  eval:    {key.removeprefix('eval_')} {change}{_number(last[key])} (step {last['step']})")
    lines.append(f"  next:    clustertune runs show {run.id} --plot")
    traits = traits_of(run.info.task)
    if traits is not None and traits.templated:  # trained on conversations: it answers them
        lines.append(f"           clustertune chat {run.id}")
    elif traits is not None and traits.head == "causal_lm":  # the model writes text
        lines.append(f"           clustertune generate {run.id} \"The prompt\"")
    return lines


def last_step(run: Run, rows: list[dict[str, Any]]) -> int:
    """The last step the run reached. Train rows come every ``train.log_every`` steps only (a run
    stopped at step 13 logged step 10 last; TRL logs nothing for a run shorter than its logging
    interval), so the newest of them, the evaluations, the final summary's step count and the
    newest complete checkpoint (a stop request saves the step it stopped at) all count."""
    steps = [int(r["step"]) for r in rows if isinstance(r.get("step"), int) and not isinstance(r["step"], bool)]
    try:
        final = run.summary.get("steps")
    except UserError:  # an unreadable summary: the other records still say how far it got
        final = None
    if isinstance(final, int):
        steps.append(final)
    steps += [s for s in (checkpoint_step(p.name) for p in run.paths.complete_checkpoints()) if s is not None]
    return max(steps, default=0)


def run_row(run: Run) -> dict[str, str]:
    rows = read_metrics(run.paths.metrics)
    best = best_eval(rows)
    return {
        "id": run.id,
        "task": run.info.task,
        "state": run.state.value,
        "steps": str(last_step(run, rows)),
        "best": f"{best[0]} {best[1]:.4g}" if best else "-",
        "age": age(run.info.created_at or None),
        "sweep": f"{run.info.sweep['id']} #{run.info.sweep['trial']}" if run.info.sweep else "",
    }


def run_record(run: Run, detail: bool = False) -> dict[str, Any]:
    """A run as plain JSON (``runs --json``; ``detail``: ``runs show --json``). Keys are stable:
    new ones may be added, none renamed or removed."""
    info = run.info
    rows = read_metrics(run.paths.metrics)
    train = [r for r in rows if r.get("kind") == "train"]
    best = best_eval(rows)
    out: dict[str, Any] = {
        "id": run.id, "name": info.name, "task": info.task, "state": run.state.value, "reason": info.reason,
        "backend": info.backend, "created_at": info.created_at or None,
        "steps": last_step(run, rows),
        "best_eval": {"metric": best[0], "value": best[1]} if best else None,
        "dir": str(run.paths.root),
        "sweep": info.sweep,
    }
    if detail:
        out |= {
            "host": info.host, "command": info.command,
            "attempts": [a.to_json() for a in run.attempts],
            "last_train": train[-1] if train else None,
            "evals": [r for r in rows if r.get("kind") == "eval"],
            "model": str(run.paths.model) if run.paths.model.is_dir() else None,
            "metrics": str(run.paths.metrics) if run.paths.metrics.is_file() else None,
        }
    return out


def show_text(run: Run) -> str:
    info = run.info
    rows = read_metrics(run.paths.metrics)
    lines = [
        f"run       {run.id}",
        f"recipe    {info.name} ({info.task})" if not run.paths.is_command
        else f"command   {shlex.join(json.loads(run.paths.command.read_text(encoding='utf-8')))}",
        f"state     {run.state.value}" + (f": {info.reason}" if info.reason else ""),
        f"created   {_to_the_second(info.created_at)} on {info.host}",
        f"dir       {run.paths.root}",
    ]
    for att in run.attempts:
        lines.append(
            f"attempt {att.n}  {att.state.value}  {att.started_at} -> {att.ended_at or '...'}"
            f"  pid {att.pid}" + (f"  resumed from {att.resumed_from}" if att.resumed_from else "")
            + (f"  exit code {att.exit_code}" if att.exit_code is not None else "")
            + (f"  {att.precision}" if att.precision else "")
        )
    source = run.attempts[-1].model if run.attempts else None
    if source:
        lines.append(f"base      {source.get('name_or_path')}"
                     + (f"  revision {source['revision']}" if source.get("revision") else "")
                     + (f"  commit {source['commit'][:12]}" if source.get("commit") else "")
                     + ("  trust_remote_code" if source.get("trust_remote_code") else ""))
    train = [r for r in rows if r.get("kind") == "train"]
    if train:
        last = train[-1]
        lines.append(f"last step {last['step']}  loss {last['loss']:.4f}  tokens/s {last.get('tokens_per_s') or 0:,.0f}"
                     + (f"  reward {last['reward_mean']:.4f}" if isinstance(last.get("reward_mean"), float) else ""))
    for r in (r for r in rows if r.get("kind") == "eval"):
        figs = "  ".join(f"{k.removeprefix('eval_')} {v:.4f}" for k, v in r.items() if k.startswith("eval_") and isinstance(v, float))
        lines.append(f"eval @ {r['step']:<6} {figs}")
    if run.paths.model.is_dir():
        lines.append(f"model     {run.paths.model}")
    lines.extend(eval_lines(run.paths))
    remote = info.remote or {}
    if remote.get("keep_on_cluster") and not run.paths.metrics.is_file():
        # Nothing came back: name where the results are, not a local path that does not exist.
        where = ", ".join(f"{h.get('address')}:{h.get('root', '~')}/train/{run.id}"
                          for n, h in enumerate(remote.get("hosts") or []) if n in remote.get("nodes", []))
        lines.append(f"results   kept on cluster {remote.get('cluster')} (launch.keep_on_cluster), "
                     f"in the run directory on the host that ran rank 0: {where}")
    elif run.paths.metrics.is_file() or not run.paths.is_command:
        lines.append(f"metrics   {run.paths.metrics}")
    if run.paths.is_command:
        lines.append(f"logs      {run.paths.logs_dir}")
    return "\n".join(lines)


def resume_steps(run: Run) -> list[int]:
    """The steps later attempts resumed from (``resumed_from: step-00000050`` in run.json)."""
    out = []
    for att in run.attempts[1:]:
        step = checkpoint_step(att.resumed_from or "")
        if step is not None:
            out.append(step)
    return out


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pts = [(int(r["step"]), float(r[key])) for r in rows if isinstance(r.get(key), (int, float))]
    return [p[0] for p in pts], [p[1] for p in pts]


# Evaluation figures that are shares of the examples: drawn on 0..1 whatever their spread.
FRACTIONS = ("eval_accuracy", "eval_exact_match", "eval_contains", "eval_f1", "eval_precision", "eval_recall")


def curves_figure(run: Run, plt: Any) -> Any:
    """The figure of a supervised run: loss (train and eval), the evaluation's own figure
    (perplexity, accuracy, exact match) where there is one, learning rate, tokens/s and gradient
    norm, each against the step, with the steps later attempts resumed from marked on every panel."""
    rows = read_metrics(run.paths.metrics)
    train = [r for r in rows if r.get("kind") == "train"]
    evals = [r for r in rows if r.get("kind") == "eval"]
    extra = next((k for k in ("eval_exact_match", "eval_accuracy", "eval_perplexity")
                  if any(k in r for r in evals)), None)
    panels: list[tuple[str, list[tuple[str, str, list[dict[str, Any]], str]]]] = [
        ("loss", [("train loss", "loss", train, "-"), ("eval loss", "eval_loss", evals, "o-")])]
    if extra == "eval_exact_match":  # SFT's generation check: both of its scores
        panels.append(("held-out generation", [("exact match", extra, evals, "o-"),
                                               ("contains reference", "eval_contains", evals, "s--")]))
    elif extra:
        panels.append((extra.removeprefix("eval_"), [(extra.removeprefix("eval_"), extra, evals, "o-")]))
    panels += [("learning rate", [("lr", "lr", train, "-")]),
               ("tokens/s", [("tokens/s", "tokens_per_s", train, "-")]),
               ("gradient norm", [("grad norm", "grad_norm", train, "-")])]
    cols = (len(panels) + 1) // 2
    fig, axes = plt.subplots(2, cols, figsize=(4.2 * cols, 7), squeeze=False)
    flat = [ax for row in axes for ax in row]
    resumed = resume_steps(run)
    for ax, (title, series) in zip(flat, panels):
        for label, key, source, style in series:
            xs, ys = _series(source, key)
            if xs:
                ax.plot(xs, ys, style, label=label)
        for i, at in enumerate(resumed):
            ax.axvline(at, color="tab:gray", linestyle=":", label="resumed" if i == 0 else None)
        ax.set_title(title)
        ax.set_xlabel("step")
        if title == "perplexity":
            ax.set_yscale("log")
        elif all(key in FRACTIONS for _, key, _, _ in series):  # a share: the whole 0..1 scale, not a zoom
            ax.set_ylim(-0.02, 1.02)
        if len(series) > 1 or resumed:
            ax.legend(fontsize=8)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(run.id, fontsize=9)
    fig.tight_layout()
    return fig


def plot(run: Run, out: Path | None = None) -> Path:
    """PNG of the training and evaluation curves (``curves.png`` in the run directory)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # a default dependency: only a damaged install lacks it
        raise UserError("--plot needs matplotlib, a dependency of clustertune: pip install matplotlib") from exc
    rows = read_metrics(run.paths.metrics)
    train = [r for r in rows if r.get("kind") == "train"]
    evals = [r for r in rows if r.get("kind") == "eval"]
    if not train and not evals:
        raise UserError(f"run {run.id} has no metrics yet ({run.paths.metrics})")
    target = out or run.paths.plot
    traits = traits_of(run.info.task)
    if traits is not None and traits.trainer == "trl":  # rewards and KL, as TRL's trainers log them
        return plot_rl(run, train, evals, plt, target)
    fig = curves_figure(run, plt)
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
