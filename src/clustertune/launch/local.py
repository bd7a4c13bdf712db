"""The local backend: training processes on this host (one in-process, or N through torchrun),
followed by the launching process's pid."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from clustertune.errors import LaunchError, RunError, UserError
from clustertune.launch.base import Resuming, accept_checkpoint
from clustertune.launch.command import command_log, finish_attempt, load_launch, root_cause, tail
from clustertune.launch.prepare_step import run_prepare
from clustertune.launch.plan import LaunchPlan, expand_env_value, node_command
from clustertune.recipe.schema import Recipe
from clustertune.runs.echo import Echo, wait_showing
from clustertune.runs.paths import RunPaths
from clustertune.runs.job import Announce, read_file_from, read_logs, wait
from clustertune.runs.report import interrupted_text
from clustertune.runs.run import CANCELLED_BY_USER, Run, interrupt_reason, pid_alive
from clustertune.runs.state import RunState

log = logging.getLogger("clustertune")


@dataclass
class LocalJob:
    run: Run


    def state(self) -> RunState:
        return self.run.reload().reconcile().state

    def settled(self) -> bool:
        return True

    def log_nodes(self, node: int | None) -> list[int | None]:
        if node not in (None, 0):
            raise RunError(f"run {self.run.id} ran on one host; it has no node {node}")
        return [None]  # the run's own log

    def read_log(self, node: int | None, offset: int) -> bytes:
        # A user's own command has no run.log of clustertune's: rank 0's output is its log.
        path = command_log(self.run.paths) if self.run.paths.is_command else self.run.paths.log
        return read_file_from(path, offset)

    def wait(self, timeout: float | None = None) -> RunState:
        return wait(self, timeout, poll=0.2)

    def logs(self, node: int | None = None) -> str:
        return read_logs(self, node)

    def cancel(self) -> None:
        state = self.state()
        if state.terminal:
            raise RunError(f"run {self.run.id} is already {state.value}; nothing to cancel")
        att = self.run.last_attempt
        if att is not None and att.host != socket.gethostname():
            raise RunError(f"run {self.run.id} runs on host {att.host}; cancel it there")
        pid = (att.pid if att else None) or 0
        wait_s = 10.0
        if self.run.paths.is_command:
            # A script's ranks see the request themselves (SIGTERM from their wrapper), and get
            # the grace period to save before they are killed.
            request_stop(self.run.paths, cancel=True)
            wait_s += command_grace(self.run)
        if pid and pid_alive(pid):
            # SIGINT: the training process records CANCELLED itself on KeyboardInterrupt, with
            # this request as the reason (a cancel, not a Ctrl-C).
            self.run.paths.cancel_request.write_text(CANCELLED_BY_USER + "\n", encoding="utf-8")
            os.kill(pid, signal.SIGINT)
            for _ in range(int(wait_s * 10)):
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
                group = (att.torchrun_pid if att else None) or 0
                if group and pid_alive(group):
                    kill_tree(group)  # torchrun and its ranks, each rank in a session of its own
        self.run.reload()
        if not self.run.state.terminal:
            self.run.transition(RunState.CANCELLED, reason=CANCELLED_BY_USER)


class LocalLauncher:
    """Several processes on this host through torchrun."""

    name = "local"
    prepares_data_here = True

    def check(self, recipe: Recipe, plan: LaunchPlan, resuming: Resuming | None = None) -> None:
        local_procs(plan)  # more processes than this host can run is an error now, not at start
        if resuming is not None:
            accept_checkpoint(resuming)

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        argv = node_command(plan, 0, ["127.0.0.1"], 0, plan.run_id, local_procs(plan))
        return ["# command", " ".join(argv)]

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None,
               show_progress: bool = True, wait: bool = True) -> LocalJob:
        """Runs the ranks and returns once they end (the run is then terminal)."""
        if plan.command:
            if announce is not None:
                how = "once (launch.runner=none)" if plan.runner == "none" else f"as {local_procs(plan)} rank(s) through torchrun"
                announce(f"run {run.id}: the command runs {how}; follow with `clustertune logs {run.id} --follow`")
            run_command(plan, run, tee=recipe.launch.tee if show_progress else None)
            return LocalJob(run)
        if announce is not None:
            announce(f"run {run.id}: {plan.procs_per_node or 'one per GPU'} processes through torchrun; "
                     f"follow with `clustertune logs {run.id} --follow`")
        run_torchrun(plan, run, show=show_progress)
        return LocalJob(run)

    def job(self, run: Run) -> LocalJob:
        return LocalJob(run)


# -- several processes on this host through torchrun ----------------------------------------


def visible_gpus(env: dict[str, str] | None = None) -> int:
    """GPUs this host offers, found without importing torch (the launcher stays light)."""
    env = dict(os.environ) if env is None else env
    vis = env.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip() and d.strip() != "-1"])
    gpus_dir = Path("/proc/driver/nvidia/gpus")
    return len(list(gpus_dir.iterdir())) if gpus_dir.is_dir() else 0


def local_procs(plan: LaunchPlan, env: dict[str, str] | None = None, cpus: int | None = None) -> int:
    """Processes to start here: the plan's, else one per GPU, else 1; more than the host has is an
    error. The GPUs are those the ranks will see (the plan's CUDA_VISIBLE_DEVICES, if it sets one)."""
    gpus = visible_gpus(env if env is not None else node_env(plan))
    cpus = cpus or os.cpu_count() or 1
    n = plan.procs_per_node or max(gpus, 1)
    if gpus and n > gpus:
        raise LaunchError(f"launch.procs_per_node={n} but this host has {gpus} GPU(s); set launch.procs_per_node<={gpus}")
    if not gpus and n > cpus:
        raise LaunchError(
            f"launch.procs_per_node={n} but this host has no GPU and {cpus} CPU core(s); "
            f"set launch.procs_per_node<={cpus} (each CPU rank needs a core of its own)"
        )
    return n


def node_env(plan: LaunchPlan, base: dict[str, str] | None = None) -> dict[str, str]:
    """The training processes' environment: ours, plus the plan's variables (pass-through names
    are inherited from ``base``, so their values never appear in argv or files)."""
    env = dict(os.environ if base is None else base)
    for k, v in plan.env:  # sorted, as the SLURM script exports them: a value may use an earlier one
        env[k] = expand_env_value(v, env)
    return env


def run_torchrun(plan: LaunchPlan, run: Run, show: bool = True) -> RunState:
    """Run the plan's ranks on this host and wait; the ranks record progress in run.json,
    this records how the job ended when they could not (a crash, Ctrl-C). Rank 0's lines
    (``logs/run.log``) appear on this process's stderr as they are written; ``show``: with the
    step and evaluation lines (a progress bar on a terminal), else the others only."""
    nproc = local_procs(plan)
    argv = node_command(plan, 0, ["127.0.0.1"], 0, run.id, nproc)
    out = run.paths.logs_dir / "launcher.log"
    for stale in (run.paths.stop_request, run.paths.cancel_request):  # left by an earlier attempt
        stale.unlink(missing_ok=True)
    run.start_attempt()
    with out.open("ab") as fh:
        # Own session: Ctrl-C and `clustertune cancel` reach torchrun through this process,
        # which forwards SIGINT; torchrun passes it on to every rank.
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=node_env(plan), start_new_session=True)
        run.record_attempt(torchrun_pid=proc.pid)  # so a cancel can reach the ranks if this process is gone
        try:
            with stop_on_signals(run.paths):
                rc = wait_showing(proc.wait, lambda: [("", run.paths.log)], Echo(progress=show))
        except KeyboardInterrupt:
            # torchrun passes SIGINT on to every rank, which records CANCELLED after its checkpoint.
            end_after_interrupt(proc, lambda: proc.send_signal(signal.SIGINT), grace=30)
            if not run.reload().state.terminal:
                run.transition(RunState.CANCELLED, reason=interrupt_reason(run.paths))
            log.warning("%s", interrupted_text(run))
            raise
    run.reload()
    # A rank killed by a signal (SIGKILL, SIGSEGV) records nothing; rank 0, failing in the
    # collective that rank left, records only the consequence. torchrun's summary names the cause.
    cause = root_cause(out.read_text(encoding="utf-8", errors="replace")) if rc != 0 and out.is_file() else None
    first = f"rank {cause[0]} {cause[1]} (its stacks, if any, are in {run.paths.rank_log(cause[0])})" if cause else ""
    if not run.state.terminal:
        run.transition(RunState.FAILED, reason=(f"{first}; " if first else "")
                       + f"torchrun exited with code {rc}; last lines of {out}:\n{tail(out)}")
    elif run.state is RunState.FAILED and rc != 0 and (run.info.reason or "").startswith("rank "):
        # A rank's error as rank 0 recorded it: torchrun's summary may name the rank that caused
        # it. (A message the attempt wrote for the user, a full disk, is left as it is.)
        if cause and not (run.info.reason or "").startswith(f"rank {cause[0]}:"):
            run.explain(f"{first}; then", first=True)
        run.explain(f"last lines of {out}:\n{tail(out)}")
    return run.state


# SIGTERM (a scheduler, `kill`, a container stopping) and SIGHUP (the terminal closed) to the
# launching process are stop requests for its ranks, which run in a session of their own and
# would otherwise train on as orphans: they save at the next step and the run ends PREEMPTED.
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_on_signals(paths: RunPaths) -> Iterator[None]:
    """While the launcher waits for its ranks, SIGTERM/SIGHUP write the run's stop request (the
    ranks and their wrappers watch it) instead of ending this process; handlers restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name.removeprefix("SIG")
        paths.stop_request.write_text(f"{name}\n", encoding="utf-8")

    before = {sig: signal.signal(sig, on_signal) for sig in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


# -- a user's own command on this host ------------------------------------------------------


def request_stop(paths: RunPaths, cancel: bool) -> None:
    """Ask every rank of a command to stop: its wrapper sends SIGTERM, then SIGKILL after the grace."""
    if cancel:
        paths.cancel_request.write_text(CANCELLED_BY_USER + "\n", encoding="utf-8")
    paths.stop_request.write_text("TERM\n", encoding="utf-8")


def command_grace(run: Run) -> float:
    """The grace period a command's run was launched with (30 s where its launch file is unreadable)."""
    try:
        return float(load_launch(run.paths.launch_section, []).launch.stop_grace_seconds)
    except UserError:
        return 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shown_logs(plan: LaunchPlan, paths: RunPaths, tee: str | None, nproc: int) -> list[tuple[str, Path]]:
    """The logs of a command's ranks that its foreground launch shows live, each with the prefix
    its lines get: rank 0's own (``tee: rank0``), every rank's (``all``), none (``None``). Under
    ``runner: none`` the node's output is the command's own."""
    if tee is None:
        return []
    if plan.runner == "none":
        return [("", paths.node_log(0))]
    if tee == "all":
        return [(f"[rank {r}] ", paths.rank_log(r)) for r in range(nproc)]
    return [("", paths.rank_log(0))]


def run_command(plan: LaunchPlan, run: Run, tee: str | None = "rank0") -> RunState:
    """Run a user's command on this host (under torchrun, or once with ``runner: none``) and
    wait, showing its output live as ``tee`` says (:func:`shown_logs`); the exit code and how
    it ended go into run.json."""
    nproc = local_procs(plan) if plan.runner == "torchrun" else 1
    argv = node_command(plan, 0, ["127.0.0.1"], 0, run.id, nproc)
    out = run.paths.node_log(0)
    for stale in (run.paths.stop_request, run.paths.cancel_request):  # left by an earlier attempt
        stale.unlink(missing_ok=True)
    att = run.start_attempt()
    env = node_env(plan)
    env.update(CLUSTERTUNE_ATTEMPT=str(att.n), CLUSTERTUNE_NODE_RANK="0",
               CLUSTERTUNE_MASTER_ADDR="127.0.0.1", CLUSTERTUNE_MASTER_PORT=str(free_port()))
    rc = run_prepare(plan, run.paths, env, show=sys.stdout if tee else None)  # launch.prepare, once per run
    if rc != 0:
        return finish_attempt(run, rc, out)
    grace = float(dict(plan.env).get("CLUSTERTUNE_STOP_GRACE", "30"))
    with out.open("ab") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        run.record_attempt(torchrun_pid=proc.pid)
        shown = shown_logs(plan, run.paths, tee, nproc)
        try:
            with stop_on_signals(run.paths):
                # The command's own lines go to stdout, as if it ran here; clustertune's to stderr.
                rc = wait_showing(proc.wait, lambda: shown, Echo(out=sys.stdout, raw=True))
        except KeyboardInterrupt:
            # Ctrl-C or `clustertune cancel`: every rank's wrapper sends SIGTERM, then SIGKILL
            # after the grace period; the launcher waits that long (a second Ctrl-C does not).
            end_after_interrupt(proc, lambda: request_stop(run.paths, cancel=True), grace=grace + 5)
            finish_attempt(run, proc.returncode, out)
            raise
    return finish_attempt(run, rc, out)


# -- ending a launched process tree -----------------------------------------------------------


def _children_by_parent() -> dict[int, list[int]]:
    """Every process on this host by its parent's pid (Linux's /proc)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue  # ended while we looked
        # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def descendants(pid: int) -> list[int]:
    """The processes below ``pid``, parents before their children."""
    tree, found, todo = _children_by_parent(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it. A process group is not enough: torchrun starts
    each rank in a session of its own, and a user's command runs in its wrapper's new session.
    The tree is stopped first, so that nothing in it starts another process while it is killed."""
    members = [pid, *descendants(pid)]
    for p in members:
        _signal_quietly(p, signal.SIGSTOP)
    members += [p for p in descendants(pid) if p not in members]  # started before the stop took
    for p in members:
        _signal_quietly(p, signal.SIGKILL)


def _signal_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_after_interrupt(proc: subprocess.Popen[bytes], ask: Callable[[], None], grace: float) -> None:
    """After a Ctrl-C: ``ask`` the ranks to stop (they checkpoint at the next step, then end) and
    wait up to ``grace`` seconds. A second Ctrl-C, or the grace running out, kills torchrun and
    every rank at once; this returns only when all of them are gone."""
    ask()
    try:
        proc.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        log.warning("the ranks did not stop within %g s: killing them", grace)
    except KeyboardInterrupt:
        log.warning("second Ctrl-C: killing torchrun and every rank now (the newest complete checkpoint is kept)")
    while True:
        try:
            kill_tree(proc.pid)
            proc.wait()
            return
        except KeyboardInterrupt:
            continue  # more Ctrl-C while it is being killed: the kill goes on
