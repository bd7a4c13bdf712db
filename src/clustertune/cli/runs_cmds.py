"""``runs`` (list, show) and ``logs``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from clustertune.runs import report
from clustertune.runs.store import get_run, list_runs

RunsRoot = typer.Option(None, "--runs-root", help="Where run directories live (default $CLUSTERTUNE_RUNS or ./runs).")


runs_app = typer.Typer(help="List runs; `runs show ID` for one.", invoke_without_command=True, no_args_is_help=False)

@runs_app.callback()
def runs_list(ctx: typer.Context, runs_root: Optional[Path] = RunsRoot,
              cluster: Optional[str] = typer.Option(None, "--cluster", help="Only runs on this SSH cluster.")) -> None:
    """List runs: id, task, state, steps, best eval figure, age."""
    if ctx.invoked_subcommand is not None:
        return
    found = list_runs(runs_root)
    if cluster is not None:
        found = [r for r in found if (r.info.remote or {}).get("cluster") == cluster]
    if not found:
        print("no runs yet")
        return
    from clustertune.launch.base import refreshed

    table = Table("id", "task", "state", "steps", "best eval", "age", box=None)
    for r in found:
        row = report.run_row(refreshed(r))  # unfinished runs: ask their backend (a call may have ended)
        table.add_row(row["id"], row["task"], row["state"], row["steps"], row["best"], row["age"])
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)

@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    plot: bool = typer.Option(False, "--plot", help="Write a PNG of the training and evaluation curves."),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Summary of one run: state, attempts, evaluations, where things are."""
    r = get_run(run_id, runs_root)
    print(report.show_text(r))
    if plot:
        print(f"plot      {report.plot(r)}")


def logs(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run ends."),
    node: Optional[int] = typer.Option(None, "--node", help="Only this node's log (multi-node runs)."),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Print a run's log."""
    from clustertune.launch.base import follow as follow_job
    from clustertune.launch.base import job_for

    r = get_run(run_id, runs_root)
    job = job_for(r)
    if follow:  # wherever the log is written (this machine, SSH hosts), line by line
        for line in follow_job(job, node, poll=0.5):
            print(line, flush=True)
        return
    print(job.logs(node), end="")

def status(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """A run's state, asked of its backend (local process, SLURM, SSH cluster)."""
    from clustertune.launch import job_for

    r = get_run(run_id, runs_root)
    state = job_for(r).state()
    print(f"{r.id} {state.value}" + (f": {r.info.reason}" if r.info.reason else ""))

def cancel(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Stop a run wherever it runs; it ends CANCELLED."""
    from clustertune.launch import job_for

    r = get_run(run_id, runs_root)
    job = job_for(r)
    job.cancel()
    print(f"{r.id} {job.state().value}")
