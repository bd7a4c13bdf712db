"""What a sweep shows: one row per trial (its values, its run's state as its backend reports it,
steps, the metric, the best value, the winner), the JSON of ``sweep show --json`` and the plot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clustertune.errors import RunError
from clustertune.launch.backends import refreshed
from clustertune.runs.metrics_file import read_metrics
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run
from clustertune.runs.sweeps import Sweep, get_sweep, metric_values, trial_metric




def trial_run(run_id: str | None, root: Path, ask_backend: bool = True) -> Run | None:
    """A trial's run (its state asked of its backend), or None: never started, or its directory gone."""
    if not run_id:
        return None
    try:
        run = get_run(run_id, root)
    except RunError:
        return None
    return refreshed(run) if ask_backend else run

def metric_text(sweep: Sweep, run: Run) -> str:
    value = trial_metric(run, sweep.info.metric)
    return f", {sweep.info.metric} {value:.4g}" if value is not None else ""


def sweep_rows(sweep: Sweep) -> list[dict[str, Any]]:
    """One row per trial: index, swept values, run, state (asked of its backend), steps, the
    metric and the best value it reached; the winner marked (best metric among completed trials)."""
    rows = []
    root = sweep.runs_root
    for t in sweep.info.trials:
        row: dict[str, Any] = {"trial": t.index, "overrides": dict(t.overrides), "run_id": t.run_id, "state": "NOT STARTED",
                               "steps": None, "metric": None, "best": None, "pruned": t.pruned, "winner": False}
        run = trial_run(t.run_id, root)
        if run is not None:
            values = metric_values(run, sweep.info.metric)
            train_steps = [r["step"] for r in read_metrics(run.paths.metrics) if r.get("kind") == "train"]
            pick = min if sweep.info.direction == "min" else max
            row.update(state="PRUNED" if t.pruned else run.state.value,
                       steps=run.summary.get("steps") if run.paths.summary.is_file() else (train_steps[-1] if train_steps else None),
                       metric=trial_metric(run, sweep.info.metric), best=pick(values) if values else None)
        rows.append(row)
    done = [r for r in rows if r["state"] == RunState.COMPLETED.value and r["metric"] is not None]
    if done:
        pick = min if sweep.info.direction == "min" else max
        winner = pick(done, key=lambda r: r["metric"])
        winner["winner"] = True
    return rows


def sweep_report(sweep_id: str, runs_root_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``sweep show --json``: the sweep's record and its rows."""
    sweep = get_sweep(sweep_id, runs_root_dir)
    rows = sweep_rows(sweep)
    win = next((r for r in rows if r["winner"]), None)
    return {"id": sweep.id, "recipe": sweep.info.recipe, "mode": sweep.info.mode, "backend": sweep.info.backend,
            "metric": sweep.info.metric, "direction": sweep.info.direction, "fixed": sweep.info.fixed,
            "keys": sweep.info.keys, "array_job": sweep.info.array_job, "dir": str(sweep.dir), "trials": rows,
            "winner": None if win is None else {"trial": win["trial"], "run_id": win["run_id"], sweep.info.metric: win["metric"]}}


def plot_sweep(sweep_id: str, out: Path | None = None, runs_root_dir: str | os.PathLike[str] | None = None) -> Path:
    """A PNG: each trial's eval curve, then the metric against each swept key."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = get_sweep(sweep_id, runs_root_dir)
    rows = sweep_rows(sweep)
    metric = sweep.info.metric
    fig, axes = plt.subplots(1, 1 + len(sweep.info.keys), figsize=(5 * (1 + len(sweep.info.keys)), 4), squeeze=False)
    curves = axes[0][0]
    root = sweep.runs_root
    for r in rows:
        run = trial_run(r["run_id"], root, ask_backend=False)
        if run is None:
            continue
        pts = [(m["step"], m[metric]) for m in read_metrics(run.paths.metrics) if m.get("kind") == "eval" and metric in m]
        if pts:
            curves.plot(*zip(*pts), marker=".", label=f"trial {r['trial']}" + (" (best)" if r["winner"] else ""))
    curves.set_xlabel("step")
    curves.set_ylabel(metric)
    curves.legend(fontsize=7)
    for ax, key in zip(axes[0][1:], sweep.info.keys):
        pts = [(r["overrides"][key], r["metric"]) for r in rows if r["metric"] is not None]
        try:
            xs = [float(x) for x, _ in pts]
        except ValueError:
            xs = list(range(len(pts)))
            ax.set_xticks(xs, [x for x, _ in pts])
        ax.scatter(xs, [y for _, y in pts])
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
    fig.suptitle(sweep.id, fontsize=9)
    fig.tight_layout()
    target = out or sweep.dir / "sweep.png"
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
