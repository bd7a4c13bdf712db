"""Following runs through the one door, whatever runs them: a run's job (state, logs, cancel), its
state asked afresh, its log lines as they come, where its results stayed; trusting a checkpoint and
removing runs. Light: `clustertune status`, `logs` and `runs` load the backends and nothing of the
preflight or the launcher's decisions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from clustertune.errors import RunError
from clustertune.launch.backends import job_for, refreshed as refresh
from clustertune.launch.base import follow as follow_lines
from clustertune.runs.dependents import uses_of
from clustertune.runs.job import Job
from clustertune.runs.paths import split_step
from clustertune.runs.run import Run
from clustertune.runs.store import get_run, list_runs, remove_run
from clustertune.runs.sealed import vouch_for


def remove_runs(run_ids: list[str], force: bool = False,
                runs_root_dir: str | os.PathLike[str] | None = None) -> Iterator[tuple[Run, Path]]:
    """Delete runs (directories, checkpoints, models), yielding each as it goes. Every id resolves
    before anything is deleted. Refused, naming why: a run that has not ended (``cancel`` it
    first), or one another run still uses (its model is that run's base, policy, reference or
    reward model); ``force`` cancels the first and deletes the second anyway."""
    found = list({r.id: r for r in (get_run(i, runs_root_dir) for i in run_ids)}.values())
    live = [r for r in found if not r.state.terminal]
    if live and not force:
        names = ", ".join(f"{r.id} ({r.state.value})" for r in live)
        raise RunError(f"not removed: {names} not ended; `clustertune cancel ID` first, or pass --force")
    going = {r.id for r in found}
    others = [r for r in list_runs(runs_root_dir) if r.id not in going]
    needed = [(r, use) for r in found for use in uses_of(r, others)]
    if needed and not force:
        lines = "\n  ".join(f"{r.id} is used by run {u.user.id} ({u.key}: {u.path})" for r, u in needed[:10])
        raise RunError(f"not removed:\n  {lines}\nremove those runs too (in the same command), or pass --force "
                       "(they then cannot load their base again)")
    for r in found:
        if not r.state.terminal:
            job(r).cancel()
            r = r.reload()
        yield r, remove_run(r, force=True)


def trust_checkpoint(ref: str, runs_root_dir: str | os.PathLike[str] | None = None) -> tuple[Path, str | None]:
    """Sign a run's checkpoint (``RUN@step-N``; ``RUN``: its newest) with this user's key: the
    user vouches for its files (an unsigned one, or one another user or machine signed), which
    must still match its state.json. Returns the checkpoint and what was wrong with its
    signature (None: this user's key had signed it; nothing changed)."""
    run_ref, step = split_step(ref)
    run = get_run(run_ref, runs_root_dir)
    found = run.paths.complete_checkpoints()
    if step is None:
        ckpt = found[-1] if found else None
    else:
        ckpt = run.paths.checkpoint(step) if run.paths.checkpoint(step) in found else None
    if ckpt is None:
        what = f"no checkpoint of step {step}" if step is not None else "no checkpoint"
        raise RunError(f"run {run.id} has {what} here (its checkpoints: {run.paths.checkpoint_list()}); "
                       f"`clustertune runs show {run.id}` lists them")
    return ckpt, vouch_for(ckpt)


def job(run: Run) -> Job:
    """The job of ``run`` as its backend sees it (state, logs, cancel), reattached from run.json."""
    return job_for(run)


def refreshed(run: Run) -> Run:
    """``run`` with its state asked of its backend when it is not finished (a call may have ended)."""
    return refresh(run)


def follow(run_job: Job, node: int | None = None, poll: float = 0.5) -> Iterator[str]:
    """The lines of a run's log (one node's, or all) as they are written, until it ends."""
    return follow_lines(run_job, node, poll=poll)


def kept_result_lines(run: Run) -> list[str]:
    """For a run whose results stayed on its SSH hosts: where they are and how to fetch them."""
    # Deferred: the SSH results module loads numpy and cloudpickle, which `status` and `runs` do without.
    from clustertune.launch.ssh.results import kept_result_lines as lines

    return lines(run)
