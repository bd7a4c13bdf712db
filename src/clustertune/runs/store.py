"""Finding runs: the runs root, listing, and lookup by id (or a unique prefix of one)."""

from __future__ import annotations

import os
from pathlib import Path

from clustertune.errors import RunError
from clustertune.runs.run import Run


def runs_root(configured: str | os.PathLike[str] | None = None) -> Path:
    """Where run directories live: the argument, else ``$CLUSTERTUNE_RUNS``, else ``./runs``."""
    if configured:
        return Path(configured).expanduser().resolve()
    env = os.environ.get("CLUSTERTUNE_RUNS")
    return Path(env).expanduser().resolve() if env else (Path.cwd() / "runs").resolve()


def list_runs(root: str | os.PathLike[str] | None = None) -> list[Run]:
    """All runs under the root, oldest first; killed local runs are reconciled to FAILED."""
    base = runs_root(root)
    if not base.is_dir():
        return []
    out = []
    for d in sorted(base.iterdir()):
        if (d / "run.json").is_file():
            try:
                out.append(Run.load(d).reconcile())
            except (OSError, ValueError, RunError):  # a damaged run directory is left out of the list
                continue
    out.sort(key=lambda r: r.info.created_at)
    return out


def get_run(run_id: str, root: str | os.PathLike[str] | None = None) -> Run:
    """The run with this id (or the only run whose id starts with it)."""
    base = runs_root(root)
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise RunError(f"{run_id!r} is not a run id; `clustertune runs` lists them")
    exact = base / run_id
    if (exact / "run.json").is_file():
        return Run.load(exact).reconcile()
    matches = [d for d in base.glob(f"{run_id}*") if (d / "run.json").is_file()] if base.is_dir() else []
    if len(matches) == 1:
        return Run.load(matches[0]).reconcile()
    if len(matches) > 1:
        names = ", ".join(sorted(m.name for m in matches)[:5])
        raise RunError(f"run id {run_id!r} is ambiguous under {base}: {names}")
    raise RunError(
        f"no run {run_id!r} under {base}; `clustertune runs` lists the runs there "
        "(set CLUSTERTUNE_RUNS or --runs-root to look elsewhere)"
    )
