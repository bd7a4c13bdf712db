"""``sweep`` (start, show, resume, cancel) and ``sweeps`` (list)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from clustertune.cli.completion import complete_override, complete_recipe
from clustertune.cli.tables import print_table
from clustertune.errors import UserError
from clustertune.runs.report import age
from clustertune.runs.sweeps import list_sweeps
from clustertune import api

SWEEP_HELP = """Run one recipe many times: every combination of the swept keys (a grid), or
--random N of them. Every trial passes the same checks as `run` before anything starts; one bad
combination names the trial and its keys, and nothing starts. Each trial is an ordinary run
(`runs` shows its sweep).

\b
Swept values, as Hydra's multirun writes them:
  train.lr=1e-4,3e-4,1e-3        a list (quote one with commas: x='a,b')
  train.seed=range(0,4)          0 1 2 3 (stop left out)
  train.lr=range(1e-4,1e-3,num=4,log)   4 values, log-spaced, ends in
  model.adapter.r=choice(8,16)   a list, written as a call
  train.lr=interval(1e-5,1e-3,log)      drawn at random (--random N)
                                 or asked of Optuna (--search optuna)
Any other key=value is one fixed value for every trial.

\b
Search: --search optuna --trials 12 [--pruner median|asha|none]
  --metric eval_loss --direction min: Optuna's TPE sampler asks for each
  trial's values; the pruner stops a trial whose eval curve trails the
  others (PRUNED, not FAILED). The study is kept in the sweep's directory:
  `sweep resume ID` continues it after the sweep's process died. On SLURM
  it runs in waves: --max-concurrent C trials (default 4) asked, submitted
  as one job array, waited for and told, then the next C.

\b
On each backend (the recipe's launch.backend):
  local: clustertune sweep quickstart train.lr=1e-3,3e-3 train.seed=0,1
         (one after another; --parallel 2 for two at once)
  ssh:   clustertune sweep my.yaml launch.backend=ssh launch.cluster=lab
           train.lr=1e-4,3e-4
  slurm: clustertune sweep my.yaml launch.backend=slurm train.lr=1e-4,3e-4,1e-3
           --max-concurrent 2   (one job array, --array=0-2%2)

\b
Then:
  clustertune sweep show ID [--json] [--plot]   trials, metric, winner
  clustertune sweep resume ID   rerun the failed or cancelled trials
  clustertune cancel ID         stop every trial
  clustertune sweeps            list sweeps
"""


def sweep(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name; or `show ID`, `resume ID`, `cancel ID`.",
                                 autocompletion=complete_recipe, metavar="RECIPE|show|resume|cancel"),
    args: Optional[list[str]] = typer.Argument(None, help="key=a,b,c (swept) and key=value (fixed).",
                                               autocompletion=complete_override, metavar="KEY=VALUES..."),
    random_n: Optional[int] = typer.Option(None, "--random", help="Draw N trials from the space instead of the whole grid."),
    grid: bool = typer.Option(False, "--grid", help="Every combination (the default)."),
    seed: int = typer.Option(0, "--seed", help="The draw of --random, or the seed of the search's sampler."),
    search: Optional[str] = typer.Option(None, "--search", help="optuna: ask Optuna for each trial's values (--trials N)."),
    n_trials: Optional[int] = typer.Option(None, "--trials", help="--search: how many trials to run."),
    pruner: str = typer.Option("median", "--pruner", help="--search: median, asha or none; stops a trial early from its eval curve."),
    max_concurrent: Optional[int] = typer.Option(None, "--max-concurrent", help="SLURM: at most C trials at once (--array=0-N%C; a search's waves of C)."),
    parallel: int = typer.Option(1, "--parallel", help="Local: N trials at once, each in its own processes."),
    metric: str = typer.Option("eval_loss", "--metric", help="The eval figure that ranks the trials."),
    direction: str = typer.Option("min", "--direction", help="min or max: which end of --metric wins."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List every trial and its overrides; start nothing."),
    as_json: bool = typer.Option(False, "--json", help="`sweep show`: JSON on stdout."),
    plot: bool = typer.Option(False, "--plot", help="`sweep show`: write a PNG of the trials' curves and the metric per key."),
    progress: bool = typer.Option(False, "--progress/--no-progress", help="Each local trial's progress bar."),
    runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run (and sweep) directories live."),
) -> None:
    rest = list(args or [])
    if recipe in ("show", "resume", "cancel"):
        if len(rest) != 1:
            raise UserError(f"`clustertune sweep {recipe} ID` takes one sweep id (`clustertune sweeps` lists them)")
        {"show": lambda: _show(rest[0], as_json, plot, runs_root),
         "resume": lambda: _resume(rest[0], runs_root, progress),
         "cancel": lambda: _cancel(rest[0], runs_root)}[recipe]()
        return
    if grid and random_n is not None:
        raise UserError("--grid and --random N choose between all combinations and N of them: give one")
    if direction not in ("min", "max"):
        raise UserError(f"--direction {direction!r}: give min or max")
    decided = api.sweeps.decide_sweep(recipe, rest, random_n=random_n, seed=seed, max_concurrent=max_concurrent,
                                      parallel=parallel, metric=metric, direction=direction,  # type: ignore[arg-type]
                                      runs_root_dir=runs_root, dry=dry_run, search=search, n_trials=n_trials,
                                      pruner=pruner)
    if dry_run:
        print(api.sweeps.describe_sweep(decided))
        return
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    s = api.sweeps.start_sweep(decided, command=["clustertune", *sys.argv[1:]], announce=say, show_progress=progress)
    if s.info.backend != "slurm":
        _show(s.id, False, False, runs_root)


sweep.__doc__ = SWEEP_HELP


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _show(sweep_id: str, as_json: bool, plot: bool, runs_root: Path | None) -> None:
    report = api.sweeps.sweep_report(sweep_id, runs_root)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    keys = report["keys"]
    m = report["metric"]
    print(f"sweep {report['id']} ({report['mode']}, {report['backend']}; {m} {report['direction']}): {report['dir']}")
    rows = [[str(r["trial"]) + (" *" if r["winner"] else ""), *(r["overrides"].get(k, "") for k in keys), r["state"],
             "-" if r["steps"] is None else str(r["steps"]), _fmt(r["metric"]), _fmt(r["best"]), r["run_id"] or "-"]
            for r in report["trials"]]
    print_table(["trial", *keys, "state", "steps", m, "best", "run"], rows, drop_first=["run", "best"])
    win = report["winner"]
    print(f"winner: trial {win['trial']} (run {win['run_id']}), {m} {_fmt(win[m])}" if win
          else "winner: none yet (no trial completed with an evaluation)")
    if plot:
        print(f"plot: {api.sweeps.plot_sweep(report['id'], runs_root_dir=runs_root)}")


def _resume(sweep_id: str, runs_root: Path | None, progress: bool) -> None:
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    s = api.sweeps.resume_sweep(sweep_id, runs_root_dir=runs_root, announce=say, show_progress=progress)
    if s.info.backend != "slurm":
        _show(s.id, False, False, runs_root)


def _cancel(sweep_id: str, runs_root: Path | None) -> None:
    stopped = api.sweeps.cancel_sweep(sweep_id, runs_root)
    print(f"sweep {sweep_id}: cancelled {len(stopped)} trial(s)" + (f" ({', '.join(stopped)})" if stopped else ""))


def sweeps(runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run (and sweep) directories live."),
           as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """List sweeps: id, mode, backend, trials by state, the best value, age."""
    found = list_sweeps(runs_root)
    reports = [api.sweeps.sweep_report(s.id, runs_root) for s in found]
    if as_json:
        print(json.dumps(reports, indent=2))
        return
    if not found:
        print("no sweeps yet")
        return
    rows = []
    for s, rep in zip(found, reports):
        states: dict[str, int] = {}
        for r in rep["trials"]:
            states[r["state"]] = states.get(r["state"], 0) + 1
        win = rep["winner"]
        rows.append([s.id, s.info.mode, s.info.backend, ", ".join(f"{n} {k}" for k, n in sorted(states.items())),
                     f"{rep['metric']} {_fmt(win[rep['metric']])}" if win else "-", age(s.info.created_at or None)])
    print_table(["id", "mode", "backend", "trials", "best", "age"], rows, drop_first=["age", "mode", "backend"])
