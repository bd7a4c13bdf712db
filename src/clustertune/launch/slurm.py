"""The SLURM backend: a batch script rendered from the plan, submitted with ``sbatch --parsable``,
followed with scontrol/sacct/squeue, stopped with scancel.

The script is built by a pure function from sorted lines (golden-file tests need no cluster).
Everything that differs per node or per attempt is computed on the node at run time, never at
submit time: the rendezvous host (the first node's address from ``scontrol show node``, so node
names that do not resolve still work), a port derived from the job id, and a rendezvous id
derived from the job id and the requeue count, so a requeued job never joins a stale rendezvous.

Stop requests: SLURM signals the batch shell (``--signal=B:USR2@90``) before the time limit and
sends SIGTERM on preemption. torchrun's agent does not pass USR2 on, so the shell's trap writes
the stop file into the run directory; the ranks agree on a step, checkpoint and exit, and the
shell requeues the job, which resumes from that checkpoint.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from clustertune.errors import LaunchError, RunError
from clustertune.identity import CHECKPOINT_KEY_ENV, checkpoint_key
from clustertune.launch.base import Resuming, accept_checkpoint
from clustertune.launch.command import command_log, failing_ranks
from clustertune.launch.plan import SITE_DEFAULT_KEYS, LaunchPlan
from clustertune.launch.sbatch import SCRIPT_NAME, batch_log_name, job_name, render_sbatch, sbatch_argv
from clustertune.runs.paths import node_log_name
from clustertune.recipe.schema import Recipe
from clustertune.runs.job import Announce, read_file_from, read_logs, wait
from clustertune.runs.run import CANCELLED_BY_USER, Run
from clustertune.runs.state import RESUMABLE, RunState


SLURM_STATES: dict[str, RunState] = {
    "PENDING": RunState.PENDING, "CONFIGURING": RunState.RUNNING, "RUNNING": RunState.RUNNING,
    "COMPLETING": RunState.RUNNING, "SUSPENDED": RunState.RUNNING, "STOPPED": RunState.RUNNING,
    "RESIZING": RunState.RUNNING, "SIGNALING": RunState.RUNNING, "STAGE_OUT": RunState.RUNNING,
    "COMPLETED": RunState.COMPLETED, "CANCELLED": RunState.CANCELLED, "TIMEOUT": RunState.TIMEOUT,
    "PREEMPTED": RunState.PREEMPTED, "FAILED": RunState.FAILED, "NODE_FAIL": RunState.FAILED,
    "OUT_OF_MEMORY": RunState.FAILED, "BOOT_FAIL": RunState.FAILED, "DEADLINE": RunState.FAILED,
    "REQUEUED": RunState.PENDING, "REQUEUE_HOLD": RunState.PENDING, "REQUEUE_FED": RunState.PENDING,
    "SPECIAL_EXIT": RunState.PENDING, "REVOKED": RunState.CANCELLED,
}


def describe_lines(plan: LaunchPlan, recipe: Recipe) -> list[str]:
    """The dry run: the exact submit command (the log path lives on it, not in the script),
    what the site decides, where the data is prepared, and the script itself."""
    script = Path(plan.run_dir) / SCRIPT_NAME
    unset = [f"launch.{k}" for k in SITE_DEFAULT_KEYS if getattr(plan.slurm, k) is None]
    where = ("on this machine, before submitting" if recipe.launch.prepare_data == "submitter"
             else "as the job's first step, on a compute node")
    lines = ["# sbatch command (the script is written to the run directory first)", shlex.join(sbatch_argv(plan, script))]
    if unset:
        lines.append(f"# site default: {', '.join(unset)} unset, so the cluster's defaults apply")
    if plan.slurm.gpus and not plan.slurm.step_cpus:
        lines.append(f"# note: no CPUs asked for: the site's default per task (often 1) serves the {plan.slurm.gpus} "
                     "ranks of each node and their data loading; set launch.cpus_per_task or launch.cpus_per_gpu")
    if not plan.command:  # a user's own command has no data step
        lines.append(f"# data: prepared {where} (launch.prepare_data)")
    lines += [f"# the nodes run {plan.python} (the submitting Python): it must exist at that path on every node",
              "# sbatch script", render_sbatch(plan)]
    return lines


def slurm_command(argv: list[str], timeout: float = 30, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise LaunchError(
            f"launch.backend=slurm: `{argv[0]}` is not on PATH; run on a SLURM login node "
            "(or install the SLURM client commands), or use launch.backend=local"
        ) from None


def submit(plan: LaunchPlan, run: Run) -> str:
    """Write the script into the run directory, submit it, record the attempt; the job id."""
    script = Path(plan.run_dir) / SCRIPT_NAME
    script.write_text(render_sbatch(plan), encoding="utf-8")
    out = slurm_command(sbatch_argv(plan, script), env=job_env(plan, run))
    if out.returncode != 0:
        msg = (out.stderr or out.stdout).strip()
        run.transition(RunState.FAILED, reason=f"sbatch rejected the job: {msg}")
        raise LaunchError(f"sbatch rejected the job (script {script}): {msg}")
    job_id = out.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise LaunchError(f"sbatch --parsable printed {out.stdout.strip()!r}, not a job id")
    run.start_attempt(job_id=job_id, state=RunState.PENDING)
    run.record_attempt(job_name=job_name(plan))
    return job_id


def job_env(plan: LaunchPlan, run: Run) -> dict[str, str]:
    """The environment sbatch submits with (the job's, under --export=ALL)."""
    # A command's attempts count on from here.
    env = {**os.environ, "CT_FIRST_ATTEMPT": str(len(run.attempts) + 1)}
    # sbatch reads these over the script's #SBATCH lines: the job's name and logs are the recipe's.
    for name in ("SBATCH_JOB_NAME", "SBATCH_OUTPUT", "SBATCH_ERROR", "SBATCH_ARRAY_INX"):
        env.pop(name, None)
    if not plan.command:
        # The ranks sign the run's checkpoints and check them before loading with this user's
        # checkpoint key: it travels as launch.env_passthrough values do, never in the script.
        env[CHECKPOINT_KEY_ENV] = checkpoint_key().hex()
    return env


@dataclass
class SchedulerView:
    state: RunState
    raw: str
    exit_code: str = ""
    reason: str = ""
    restarts: int | None = None  # requeues so far (scontrol only)


def _parse_kv(text: str) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", text))


def scontrol_view(job_id: str) -> SchedulerView | None:
    """The controller's view: exact, with restarts; forgotten MinJobAge after the job ends."""
    out = slurm_command(["scontrol", "show", "job", "-o", job_id])
    if out.returncode != 0 or not out.stdout.strip():
        return None
    kv = _parse_kv(out.stdout)
    raw = kv.get("JobState", "")
    if raw not in SLURM_STATES:
        return None
    restarts = kv.get("Restarts", "")
    return SchedulerView(SLURM_STATES[raw], raw, kv.get("ExitCode", ""), kv.get("Reason", ""),
                         int(restarts) if restarts.isdigit() else None)


def sacct_view(job_id: str) -> SchedulerView | None:
    """Accounting's view (kept long after the job); None where accounting is off."""
    if shutil.which("sacct") is None:
        return None
    out = slurm_command(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode"])
    if out.returncode != 0 or not out.stdout.strip():
        return None  # "Slurm accounting storage is disabled"
    raw, _, code = out.stdout.strip().splitlines()[0].partition("|")
    raw = raw.split()[0] if raw.strip() else ""  # "CANCELLED by 0"
    return SchedulerView(SLURM_STATES[raw], raw, code) if raw in SLURM_STATES else None


def squeue_view(job_id: str) -> SchedulerView | None:
    """``squeue -t all`` lists finished jobs too (plain squeue drops them), until MinJobAge."""
    out = slurm_command(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"])
    raw = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    return SchedulerView(SLURM_STATES[raw], raw) if raw in SLURM_STATES else None


def query_job(job_id: str) -> SchedulerView | None:
    """The job's state from the controller, else accounting, else squeue -t all."""
    return scontrol_view(job_id) or sacct_view(job_id) or squeue_view(job_id)


RENDEZVOUS_ERRORS = ("RendezvousConnectionError", "RendezvousTimeoutError", "RendezvousClosedError")


def rendezvous_problem(run: Run, job_id: str) -> str | None:
    """A sentence naming the rendezvous endpoint when a node failed to join it."""
    logs = run.paths.logs_dir
    text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in logs.glob(node_log_name("*")))
    if not any(e in text for e in RENDEZVOUS_ERRORS):
        return None
    batch = logs / batch_log_name(job_id)
    found = re.findall(r"rendezvous (\S+)", batch.read_text(errors="replace")) if batch.is_file() else []
    where = found[-1] if found else "(endpoint not logged)"
    return (f"the nodes did not meet at the rendezvous {where} within its timeout (launch.rdzv_timeout): "
            "check that every node reaches the first node at that address and port "
            "(launch.node_address_suffix, firewalls)")


def node_log_tails(run: Run, lines: int = 8) -> str:
    parts = []
    for log in sorted(run.paths.logs_dir.glob(node_log_name("*"))):
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        if text:
            parts.append(f"--- last lines of {log.name}:\n" + "\n".join(text))
    return "\n".join(parts)


@dataclass
class SlurmJob:
    run: Run

    @property
    def job_id(self) -> str:
        for att in reversed(self.run.attempts):
            if att.backend == "slurm" and att.job_id:
                return att.job_id
        raise RunError(f"run {self.run.id} has no SLURM job id in {self.run.paths.run_json}")

    def state(self) -> RunState:
        """Ask SLURM; record what the ranks could not (a node that died, a cancel, a requeue)."""
        run = self.run.reload()
        view = query_job(self.job_id)
        if view is None:
            return run.state
        if run.paths.is_command:
            return command_state(run, self.job_id, view)
        if run.state.terminal:
            # Requeued (SLURM counts the restarts): a new attempt, PENDING until rank 0 starts it.
            seen = sum(1 for a in run.attempts if a.job_id == self.job_id)
            if (view.state is RunState.PENDING and run.state in RESUMABLE and view.restarts is not None
                    and view.restarts >= seen):
                run.start_attempt(job_id=self.job_id, state=RunState.PENDING)
            return run.state
        if view.state is RunState.RUNNING and run.state is RunState.PENDING:
            run.transition(RunState.RUNNING)
        elif view.state.terminal:
            # The job ended but the ranks did not record how: take SLURM's word for it.
            final = RunState.FAILED if view.state is RunState.COMPLETED else view.state
            why = f"SLURM job {self.job_id} ended {view.raw}" + (f" (exit code {view.exit_code})" if view.exit_code else "")
            if final is RunState.FAILED:
                rdzv = rendezvous_problem(run, self.job_id)
                tails = node_log_tails(run)
                why += (f": {rdzv}" if rdzv else "") + (f"\n{tails}" if tails else "")
            run.transition(final, reason=why)
        return run.state

    def settled(self) -> bool:
        """No longer in SLURM's hands (a requeued job would be PENDING again)."""
        view = query_job(self.job_id)
        return view is None or view.state.terminal

    def log_nodes(self, node: int | None) -> list[int | None]:
        if node is None:
            return [None]  # the run's own log
        if not self.run.paths.node_log(node).is_file():
            have = sorted(p.name for p in self.run.paths.logs_dir.glob(node_log_name("*")))
            raise RunError(f"run {self.run.id} has no log for node {node} (has: {', '.join(have) or 'none yet'})")
        return [node]

    def read_log(self, node: int | None, offset: int) -> bytes:
        if node is None:
            # A user's own command has no run.log of clustertune's: rank 0's output is its log.
            return read_file_from(command_log(self.run.paths) if self.run.paths.is_command else self.run.paths.log,
                                  offset)
        return read_file_from(self.run.paths.node_log(node), offset)

    def wait(self, timeout: float | None = None, poll: float = 1.0) -> RunState:
        return wait(self, timeout, poll)

    def logs(self, node: int | None = None) -> str:
        if node is not None:
            return read_logs(self, node)
        # The batch script's own lines (data step, requeues, signals), then the ranks' run log
        # (a command's: rank 0's output).
        own = command_log(self.run.paths) if self.run.paths.is_command else self.run.paths.log
        parts = [self.run.paths.logs_dir / batch_log_name(self.job_id), own]
        return "".join(read_file_from(p, 0).decode("utf-8", "replace") for p in parts)

    def cancel(self) -> None:
        state = self.state()
        if state.terminal and (query_job(self.job_id) or SchedulerView(state, "")).state.terminal:
            raise RunError(f"run {self.run.id} is already {state.value}; nothing to cancel")
        self.run.paths.cancel_request.write_text(CANCELLED_BY_USER + "\n", encoding="utf-8")
        out = slurm_command(["scancel", self.job_id])
        if out.returncode != 0:
            raise LaunchError(f"scancel {self.job_id} failed: {(out.stderr or out.stdout).strip()}")
        for _ in range(100):
            view = query_job(self.job_id)
            if view is None or view.state.terminal:
                break
            time.sleep(0.2)
        run = self.run.reload()
        if not run.state.terminal:
            run.transition(RunState.CANCELLED, reason=f"{CANCELLED_BY_USER}, through scancel")


def command_state(run: Run, job_id: str, view: SchedulerView) -> RunState:
    """A user's command records nothing itself: its run follows SLURM. A requeue (the batch
    shell's after a stop request, or a preemption's) closes the attempt PREEMPTED and opens the
    next; the job's end is the run's, with its exit code (CANCELLED where a cancel asked)."""
    restarts = view.restarts or 0
    while sum(1 for a in run.attempts if a.job_id == job_id) <= restarts:  # requeued since we looked
        if not run.state.terminal:
            if run.state is RunState.PENDING:  # it ran between two looks
                run.transition(RunState.RUNNING)
            run.transition(RunState.PREEMPTED, reason=f"SLURM job {job_id} was requeued (stop request or preemption)")
        run.start_attempt(job_id=job_id, state=RunState.PENDING)
    if run.state is RunState.PENDING and (view.state is RunState.RUNNING or view.state in (RunState.COMPLETED, RunState.TIMEOUT, RunState.PREEMPTED)):
        run.transition(RunState.RUNNING)  # (a job that ended between two looks ran first)
    if view.state.terminal and not run.state.terminal:
        code = view.exit_code.split(":")[0]
        if code.isdigit():
            run.record_attempt(exit_code=int(code))
        final = RunState.CANCELLED if run.paths.cancel_request.is_file() else view.state
        why = None if final is RunState.COMPLETED else f"SLURM job {job_id} ended {view.raw}" + (
            f" (exit code {view.exit_code})" if view.exit_code else "")
        if final is RunState.FAILED:
            tails = node_log_tails(run)
            cannot = re.search(r"^clustertune: cannot start .*$", tails, re.M)
            logs = sorted(run.paths.logs_dir.glob(node_log_name("*")))
            own = failing_ranks(run.paths, [p.read_text(encoding="utf-8", errors="replace") for p in logs])
            why = (f"{cannot.group(0)}\n" if cannot else "") + f"{why}" + (f"\n{own or tails}" if own or tails else "")
        run.transition(final, reason=why)
    return run.state


class SlurmLauncher:
    """An sbatch job: the data is prepared as its first step, on the cluster."""

    name = "slurm"
    prepares_data_here = False

    def check(self, recipe: Recipe, plan: LaunchPlan, resuming: Resuming | None = None) -> None:
        if shutil.which("sbatch") is None:
            raise LaunchError(
                "launch.backend=slurm: `sbatch` is not on PATH; run on a SLURM login node "
                "(or install the SLURM client commands), or use launch.backend=local"
            )
        if resuming is not None:
            accept_checkpoint(resuming)

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        return describe_lines(plan, recipe)

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None,
               show_progress: bool = True, wait: bool = True) -> SlurmJob:
        """Returns once SLURM accepted the job (the run is PENDING)."""
        submit(plan, run)
        return SlurmJob(run)

    def job(self, run: Run) -> SlurmJob:
        return SlurmJob(run)
