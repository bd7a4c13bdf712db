"""A sweep's trials as one SLURM job array: each array task runs its trial's own batch script
(the script a single ``run`` would submit, written into the trial's run directory), so every
trial keeps its run directory, its data step, its stop requests and its requeue.

The array's ``#SBATCH`` lines are the trials' (they must be the same for every trial: a job array
gives every task the same resources), plus ``--array=0-N[%C]``. Each task's job id is
``<array job>_<index>``: that is what each trial's run records, and what ``status``, ``logs`` and
``cancel`` hand to scontrol, sacct and scancel.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from clustertune.errors import LaunchError
from clustertune.launch.plan import LaunchPlan
from clustertune.launch.sbatch import SCRIPT_NAME, render_sbatch, sbatch_flags
from clustertune.launch.slurm import job_env, slurm_command
from clustertune.runs.run import Run
from clustertune.runs.state import RunState

ARRAY_SCRIPT = "array.sbatch"


def shared_flags(plans: Sequence[LaunchPlan]) -> list[str]:
    """The ``#SBATCH`` flags every trial asks for (its job name aside); a LaunchError naming the
    flags that differ when they do not agree."""
    def own(plan: LaunchPlan) -> list[str]:
        return [f for f in sbatch_flags(plan) if not f.startswith("--job-name=")]

    first = own(plans[0])
    for i, plan in enumerate(plans[1:], start=1):
        theirs = own(plan)
        if theirs != first:
            differ = sorted(set(first) ^ set(theirs))
            raise LaunchError(
                f"trial {i} asks SLURM for other resources than trial 0 ({', '.join(differ)}): the tasks of one job "
                "array share one set of #SBATCH lines; sweep the launch.* keys that set them in separate sweeps")
    return first


def max_array_size() -> int | None:
    """The cluster's MaxArraySize (array indices run below it); None where it cannot be asked."""
    out = slurm_command(["scontrol", "show", "config"])
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out.stdout or "", re.M)
    return int(m.group(1)) if out.returncode == 0 and m else None


def check_array(trials: int, max_concurrent: int | None) -> None:
    """Problems SLURM would answer with a refusal, found before anything is written."""
    if max_concurrent is not None and max_concurrent < 1:
        raise LaunchError(f"--max-concurrent {max_concurrent}: at least 1 trial must be able to run")
    limit = max_array_size()
    if limit is not None and trials > limit:
        raise LaunchError(f"{trials} trials make array indices 0-{trials - 1}, but this cluster's MaxArraySize is "
                          f"{limit} (indices up to {limit - 1}): split the sweep, or ask the site to raise it")


def array_spec(trials: Sequence[int], max_concurrent: int | None) -> str:
    """``0-3%2``; a set of indices that is not one range is listed (``1,3%2``)."""
    idx = sorted(trials)
    text = f"{idx[0]}-{idx[-1]}" if idx == list(range(idx[0], idx[-1] + 1)) else ",".join(map(str, idx))
    return text + (f"%{max_concurrent}" if max_concurrent else "")


def render_array(sweep_id: str, flags: list[str], run_dirs: dict[int, str]) -> str:
    """The array's batch script: each task finds its trial's run directory and runs its script."""
    q = shlex.quote
    lines = ["#!/bin/bash", *(f"#SBATCH {f}" for f in flags),
             f"# clustertune sweep {sweep_id}: array task i runs trial i's own script, in its run directory.", "",
             'case "$SLURM_ARRAY_TASK_ID" in']
    lines += [f"  {i}) CT_TRIAL_DIR={q(d)} ;;" for i, d in sorted(run_dirs.items())]
    lines += ['  *) echo "clustertune sweep: no trial $SLURM_ARRAY_TASK_ID in this array" >&2; exit 2 ;;', "esac",
              "# The task's own lines go to its run's batch log, as a single run's do.",
              'exec >> "$CT_TRIAL_DIR/logs/slurm-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.out" 2>&1',
              f'exec /bin/bash "$CT_TRIAL_DIR"/{SCRIPT_NAME}']
    return "\n".join(lines) + "\n"


def submit_array(sweep_id: str, sweep_dir: Path, trials: dict[int, tuple[LaunchPlan, Run]],
                 max_concurrent: int | None, job_name: str) -> str:
    """Write each trial's script and the array's, submit it once, record each trial's attempt
    (job id ``<array>_<index>``); the array's job id. A refusal fails every trial's run."""
    plans = [plan for plan, _ in trials.values()]
    flags = [*shared_flags(plans), f"--job-name={job_name}"]
    for plan, _ in trials.values():
        (Path(plan.run_dir) / SCRIPT_NAME).write_text(render_sbatch(plan), encoding="utf-8")
    script = sweep_dir / ARRAY_SCRIPT
    script.write_text(render_array(sweep_id, sorted(flags), {i: plan.run_dir for i, (plan, _) in trials.items()}),
                      encoding="utf-8")
    log = sweep_dir / "logs" / "slurm-%A_%a.out"
    first_plan, first_run = next(iter(trials.values()))
    argv = ["sbatch", "--parsable", f"--array={array_spec(list(trials), max_concurrent)}", f"--output={log}",
            f"--error={log}", str(script)]
    out = slurm_command(argv, env=job_env(first_plan, first_run))
    if out.returncode != 0:
        msg = (out.stderr or out.stdout).strip()
        for _, run in trials.values():
            run.transition(RunState.FAILED, reason=f"sbatch rejected the sweep's array: {msg}")
        raise LaunchError(f"sbatch rejected the sweep's array (script {script}): {msg}")
    array_id = out.stdout.strip().split(";")[0]
    if not array_id.isdigit():
        raise LaunchError(f"sbatch --parsable printed {out.stdout.strip()!r}, not a job id")
    for i, (_, run) in trials.items():
        run.start_attempt(job_id=f"{array_id}_{i}", state=RunState.PENDING)
        run.record_attempt(job_name=job_name)
    return array_id

