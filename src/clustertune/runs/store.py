"""Finding runs: the runs root, listing, and lookup by id (or a unique prefix of one)."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path
from typing import Literal

from clustertune.errors import RunError
from clustertune.fsutil import temp_sibling
from clustertune.runs.paths import RUN_JSON
from clustertune.runs.run import Run
from clustertune.runs.state import RunState


# The run id that means "the newest run" wherever a run id is accepted.
LAST = "last"


def runs_root(configured: str | os.PathLike[str] | None = None) -> Path:
    """Where run directories live: the argument, else ``$CLUSTERTUNE_RUNS``, else ``./runs``."""
    if configured:
        return Path(configured).expanduser().resolve()
    env = os.environ.get("CLUSTERTUNE_RUNS")
    return Path(env).expanduser().resolve() if env else (Path.cwd() / "runs").resolve()


def list_runs(root: str | os.PathLike[str] | None = None) -> list[Run]:
    """All runs under the root, oldest first; killed local runs are reconciled to FAILED."""
    base = runs_root(root)
    if base.exists() and not base.is_dir():
        raise RunError(f"runs root {base} is not a directory; pass --runs-root DIR (or set $CLUSTERTUNE_RUNS) "
                       "to the directory that holds the run directories")
    if not base.is_dir():
        return []
    out = []
    for d in sorted(base.iterdir()):
        if not d.name.startswith(".") and (d / "run.json").is_file():  # hidden: a run being removed
            try:
                out.append(Run.load(d).reconcile())
            except (OSError, ValueError, RunError):  # a damaged run directory is left out of the list
                continue
    out.sort(key=lambda r: r.info.created_at)
    return out


# How a name that several runs answer to is taken (see :func:`get_run`).
ByName = Literal["refuse", "newest", "newest_model"]


def get_run(run_id: str, root: str | os.PathLike[str] | None = None, by_name: ByName = "refuse") -> Run:
    """The run ``run_id`` names, as users write it: a run id, a unique prefix of one, ``last``
    (the newest run), or a run's name (its recipe's, e.g. ``quickstart``, or a prefix that only
    that name's runs start with).

    A name several runs answer to is, with ``by_name``: ``refuse`` an error listing them (for
    what changes a run: cancel, rm, --resume); ``newest`` the newest of them (status, logs,
    show); ``newest_model`` the newest that completed with a final model (generate, chat, eval,
    export, a base or policy ``run:NAME``). Prefixes that span several names are ambiguous."""
    base = runs_root(root)
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise RunError(f"{run_id!r} is not a run id; `clustertune runs` lists them")
    exact = base / run_id
    if (exact / RUN_JSON).is_file():
        return Run.load(exact).reconcile()
    if run_id == LAST:
        found = list_runs(base)
        if not found:
            raise RunError(f"no runs under {base} yet, so there is no last run "
                           "(set CLUSTERTUNE_RUNS or --runs-root to look elsewhere)")
        return found[-1]
    matches = [d for d in base.glob(f"{glob.escape(run_id)}*") if (d / RUN_JSON).is_file()] if base.is_dir() else []
    if len(matches) == 1:
        return Run.load(matches[0]).reconcile()
    if len(matches) > 1:
        runs, damaged = [], False
        for m in matches:
            try:
                runs.append(Run.load(m).reconcile())
            except (OSError, ValueError, RunError):  # a damaged run directory: never picked by name
                damaged = True
        runs.sort(key=lambda r: r.info.created_at)
        one_name = not damaged and len({r.info.name for r in runs}) == 1
        if by_name != "refuse" and one_name:
            return _newest(runs, by_name, run_id)
        shown = ", ".join(sorted(m.name for m in matches)[-5:])
        hint = "; give the whole id" if one_name else ""
        raise RunError(f"run id {run_id!r} is ambiguous under {base}: {len(matches)} runs ({shown}){hint}")
    head, at, step = run_id.partition("@")
    if at and head and base.is_dir() and any((d / RUN_JSON).is_file() for d in base.glob(f"{glob.escape(head)}*")):
        raise RunError(f"{run_id!r} names a checkpoint ({step or 'none'}) of run {head!r}; this command acts on "
                       f"whole runs, so it takes the run id alone ({head!r}); checkpoints are named by generate, "
                       "chat, eval, serve, export and `runs trust`")
    raise RunError(
        f"no run {run_id!r} under {base}; `clustertune runs` lists the runs there "
        "(set CLUSTERTUNE_RUNS or --runs-root to look elsewhere)"
    )


def _newest(runs: list[Run], by_name: ByName, name: str) -> Run:
    if by_name == "newest":
        return runs[-1]
    done = [r for r in runs if r.state is RunState.COMPLETED and r.paths.has_final_model]
    if not done:
        states = ", ".join(f"{r.id} {r.state.value}" for r in runs[-3:])
        raise RunError(f"no run of {name!r} has a final model yet ({states}); finish one or name another run")
    return done[-1]


def remove_run(run: Run, force: bool = False) -> Path:
    """Delete a run's directory. A run that has not ended is refused unless ``force`` (the caller
    stops it first). The directory is renamed aside before it is deleted, so a half-deleted run
    never lists as a run."""
    if not run.state.terminal and not force:
        raise RunError(f"run {run.id} is {run.state.value}; `clustertune cancel {run.id}` first, "
                       "or pass --force to remove it anyway")
    root = run.paths.root
    aside = temp_sibling(root, "removing")
    try:
        os.rename(root, aside)
    except OSError as exc:
        raise RunError(f"cannot remove run {run.id} ({exc.strerror}: {root})") from None
    shutil.rmtree(aside, ignore_errors=True)
    return root
