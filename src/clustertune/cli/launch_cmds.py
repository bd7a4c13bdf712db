"""``launch``: a user's own command with clustertune's launch plumbing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from clustertune.cli.completion import complete_launch_item

from clustertune.runs.state import RunState
from clustertune import api


def split_command(args: list[str]) -> tuple[list[str], list[str] | None]:
    """``clustertune [opts] launch ... -- COMMAND``: the part for clustertune and the command
    (None without ``--``). Split here because click drops the ``--`` itself."""
    for i, a in enumerate(args):
        if a == "launch":
            if "--" in args[i:]:
                cut = args.index("--", i)
                return args[:cut], args[cut + 1:]
            return args, None
        if not a.startswith("-"):
            break
    return args, None


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def launch(
    ctx: typer.Context,
    items: Optional[list[str]] = typer.Argument(None, help="A YAML file with a launch section, and/or launch.* keys, "
                                                "then `--` and the command.", autocompletion=complete_launch_item),
    resume: Optional[str] = typer.Option(None, "--resume", help="Run this run's command again, as its next attempt."),
    runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run directories live."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the launch plan (and sbatch script and command) and, on SLURM or SSH, what the cluster says of it; run nothing."),
) -> None:
    """Run your own script (`-- python train.py ...`) on every rank: torchrun per node by default,
    a run id, logs, status, cancel, stop requests and requeue as for recipes."""
    command = (ctx.obj or {}).get("command")
    items = list(items or [])
    source = items.pop(0) if items and "=" not in items[0] else None
    decided = api.decide_command(command, source, items, resume=resume, runs_root_dir=runs_root, dry=dry_run)
    if dry_run:  # the same decision a launch starts from, described
        print(api.describe(decided))
        return
    if decided.cluster_report is not None:  # it passed (a problem stopped it in the decision)
        _to_stderr(decided.cluster_report.summary())
    r = api.start(decided, command=None if resume is not None else ["clustertune", *sys.argv[1:]], announce=_to_stderr)
    if r.state is RunState.PENDING:
        print(f"run {r.id} submitted (SLURM job {r.attempts[-1].job_id}); follow it with `clustertune status {r.id}`")
        return
    code = r.last_attempt.exit_code if r.last_attempt else None
    print(f"run {r.id} {r.state.value}" + (f" (exit code {code})" if code is not None else "")
          + (f": {r.info.reason}" if r.state is not RunState.COMPLETED and r.info.reason else ""))
    print(f"  logs: {r.paths.logs_dir}")
    if r.state is not RunState.COMPLETED:
        raise typer.Exit(1)
