"""``runs`` (list, show, trust, rm), ``logs``, ``status`` and ``cancel``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from clustertune.cli.completion import complete_run_id
from clustertune.cli.tables import print_table
from clustertune.runs import report
from clustertune import api
from clustertune.runs.store import get_run, list_runs
from clustertune.runs.sweeps import is_sweep_id

RunsRoot = typer.Option(None, "--runs-root", help="Where run directories live (default $CLUSTERTUNE_RUNS or ./runs).")


runs_app = typer.Typer(help="List runs; `runs show ID` for one, `runs rm ID` to delete, `runs trust ID@step-N` to "
                       "sign a checkpoint.", invoke_without_command=True,
                       no_args_is_help=False)
RunId = typer.Argument(..., help="Run id, a unique prefix of one, or `last` (the newest run).",
                       autocompletion=complete_run_id)
AsJson = typer.Option(False, "--json", help="Machine-readable JSON on stdout.")


@runs_app.callback()
def runs_list(ctx: typer.Context, runs_root: Optional[Path] = RunsRoot,
              cluster: Optional[str] = typer.Option(None, "--cluster", help="Only runs on this SSH cluster."),
              as_json: bool = AsJson) -> None:
    """List runs: id, task, state, steps, best eval figure, age."""
    if ctx.invoked_subcommand is not None:
        return
    found = list_runs(runs_root)
    if cluster is not None:
        found = [r for r in found if (r.info.remote or {}).get("cluster") == cluster]
    found = [api.refreshed(r) for r in found]  # unfinished runs: ask their backend (a call may have ended)
    if as_json:
        print(json.dumps([report.run_record(r) for r in found], indent=2))
        return
    if not found:
        print("no runs yet")
        return
    rows = [report.run_row(r) for r in found]
    sweeps = any(row["sweep"] for row in rows)  # the column only where a run is a sweep's trial
    print_table(["id", "task", "state", "steps", "best eval", "age", *(["sweep"] if sweeps else [])],
                [[row["id"], row["task"], row["state"], row["steps"], row["best"], row["age"],
                  *([row["sweep"]] if sweeps else [])] for row in rows],
                drop_first=["sweep", "age", "best eval", "steps", "task"])

@runs_app.command("show")
def runs_show(
    run_id: str = RunId,
    plot: bool = typer.Option(False, "--plot", help="Write a PNG of the training and evaluation curves."),
    runs_root: Optional[Path] = RunsRoot,
    as_json: bool = AsJson,
) -> None:
    """Summary of one run: state, attempts, evaluations, where things are."""
    r = get_run(run_id, runs_root, by_name="newest")
    if as_json:
        record = report.run_record(r, detail=True)
        if plot:
            record["plot"] = str(report.plot(r))
        print(json.dumps(record, indent=2))
        return
    print(report.show_text(r))
    if plot:
        print(f"plot      {report.plot(r)}")

@runs_app.command("trust")
def runs_trust(
    ref: str = typer.Argument(..., metavar="RUN@step-N", help="The checkpoint to sign (RUN alone: its newest).",
                              autocompletion=complete_run_id),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Sign a run's checkpoint with your key, so it may be loaded: you vouch for its files (it
    is unsigned, or another user or machine signed it). Its files must still match its
    state.json. `run --resume ID --trust-checkpoint` does this for the checkpoint a resume
    starts from."""
    ckpt, problem = api.trust_checkpoint(ref, runs_root)
    print(f"{ckpt}: signed with your key ({problem})" if problem else f"{ckpt}: already signed with your key; "
          "nothing changed")

@runs_app.command("rm")
def runs_rm(
    run_ids: list[str] = typer.Argument(..., help="Run ids (or unique prefixes, or `last`).",
                                        autocompletion=complete_run_id),
    force: bool = typer.Option(False, "--force", help="Also runs that have not ended (they are cancelled first) "
                               "and runs other runs use as their base."),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Delete runs: their directories, checkpoints and model included. Runs that have not ended,
    or that another run still uses as its base, are refused unless --force."""
    for r, path in api.remove_runs(run_ids, force, runs_root):
        kept = (r.info.remote or {}).get("keep_on_cluster")
        print(f"removed {r.id} ({path})" + (f"; its results kept on cluster {r.info.remote.get('cluster')} "
                                              "are left there" if kept else ""))


def logs(
    run_id: str = RunId,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run ends."),
    node: Optional[int] = typer.Option(None, "--node", help="Only this node's log (multi-node runs)."),
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Print a run's log."""
    r = get_run(run_id, runs_root, by_name="newest")
    job = api.job(r)
    if follow:  # wherever the log is written (this machine, SSH hosts), line by line
        for line in api.follow(job, node, poll=0.5):
            print(line, flush=True)
        return
    print(job.logs(node), end="")

def status(
    run_id: str = RunId,
    runs_root: Optional[Path] = RunsRoot,
    as_json: bool = AsJson,
) -> None:
    """A run's state, asked of its backend (local process, SLURM, SSH cluster)."""
    r = get_run(run_id, runs_root, by_name="newest")
    state = api.job(r).state()
    r = r.reload()
    # A scheduler's job: its id and the name squeue shows (launch.job_name).
    named = next((a for a in reversed(r.attempts) if a.job_name), None)
    if as_json:
        record = {"id": r.id, "state": state.value, "reason": r.info.reason}
        if named:
            record |= {"job_id": named.job_id, "job_name": named.job_name}
        print(json.dumps(record))
        return
    job = f" (SLURM job {named.job_id}, name {named.job_name})" if named else ""
    print(f"{r.id} {state.value}{job}" + (f": {r.info.reason}" if r.info.reason else ""))

def cancel(
    run_id: str = RunId,
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Stop a run wherever it runs; it ends CANCELLED. A sweep's id cancels every trial still queued or running."""
    if is_sweep_id(run_id, runs_root):
        stopped = api.sweeps.cancel_sweep(run_id, runs_root)
        print(f"sweep {run_id}: cancelled {len(stopped)} trial(s)" + (f" ({', '.join(stopped)})" if stopped else ""))
        return
    r = get_run(run_id, runs_root)
    job = api.job(r)
    job.cancel()
    print(f"{r.id} {job.state().value}")
