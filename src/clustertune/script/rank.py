"""``python -m clustertune.script.rank [--per-node] COMMAND...``: runs one rank (or, with
``--per-node``, one node's command) of a user's script on a node. Standard library only.

The launcher starts this under torchrun (one per rank) or once per node, with the run's
environment (:mod:`clustertune.script` names it). It runs the command and passes its output on,
copying each rank's lines into ``logs/rank-R.log``; it turns the run's stop-request file, and
SIGTERM/SIGINT from the node's launcher, into SIGTERM for the command's process group, then
SIGKILL ``$CLUSTERTUNE_STOP_GRACE`` seconds later. A command that cannot be started exits 127
(126: not executable) with a line naming it and the host.

With ``--slurm-ranks`` (``launch.runner: srun``) each SLURM task is one rank: the variables
torchrun would set (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) are set from SLURM's and the job's.

With ``--per-node`` (``launch.runner: none``) the placeholders ``{node_rank}``, ``{nnodes}``,
``{master_addr}``, ``{master_port}`` and ``{run_dir}`` in the command's arguments are filled in
for this node (other braces are left alone).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from clustertune.script import CHECKPOINT_DIR_ENV, CHECKPOINTS_DIR, LIB_DIR, RUN_DIR_ENV, STOP_FILE
from clustertune.script.stage import STAGE_ENV, StageError, stage

GRACE_ENV = "CLUSTERTUNE_STOP_GRACE"
NODE_RANK_ENV = "CLUSTERTUNE_NODE_RANK"
NNODES_ENV = "CLUSTERTUNE_NNODES"
MASTER_ADDR_ENV = "CLUSTERTUNE_MASTER_ADDR"
MASTER_PORT_ENV = "CLUSTERTUNE_MASTER_PORT"
PLACEHOLDER = re.compile(r"\{(node_rank|nnodes|master_addr|master_port|run_dir)\}")


def node_rank(env: dict[str, str]) -> str:
    """This node's index: ours, else torchrun's GROUP_RANK, else SLURM's node id."""
    for name in (NODE_RANK_ENV, "GROUP_RANK", "SLURM_NODEID"):
        if env.get(name):
            return env[name]
    return "0"


def fill_placeholders(argv: list[str], env: dict[str, str]) -> list[str]:
    """The command with this node's values in place of the known ``{placeholders}``."""
    values = {
        "node_rank": node_rank(env),
        "nnodes": env.get(NNODES_ENV, "1"),
        "master_addr": env.get(MASTER_ADDR_ENV, "127.0.0.1"),
        "master_port": env.get(MASTER_PORT_ENV, "29500"),
        "run_dir": env.get(RUN_DIR_ENV, "."),
    }
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in argv]


def slurm_rank_env(env: dict[str, str]) -> dict[str, str]:
    """torchrun's rank variables for this SLURM task (srun sets its own; the batch script the
    rendezvous host and port)."""
    nodes = int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or 1)
    world = int(env["SLURM_NTASKS"])
    # SLURM_NTASKS_PER_NODE is set when the step asked for a count per node, as ours does.
    local_world = env.get("SLURM_NTASKS_PER_NODE") or str(world // max(nodes, 1))
    return {
        "RANK": env["SLURM_PROCID"], "LOCAL_RANK": env["SLURM_LOCALID"], "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": local_world, "GROUP_RANK": env.get("SLURM_NODEID", "0"),
        "MASTER_ADDR": env.get(MASTER_ADDR_ENV, "127.0.0.1"), "MASTER_PORT": env.get(MASTER_PORT_ENV, "29500"),
    }


def _die_with_parent() -> None:
    # Linux: the command is killed if this wrapper is (torchrun SIGKILLs a rank's process group
    # after its own grace period; the command runs in a group of its own).
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _Say:
    """clustertune's own lines of a rank (staging, a stop request, a command that cannot start):
    on the node's output and in the rank's own log, where the command's lines go too. One lock:
    the stopper's thread writes while the main one copies the command's output; re-entrant, as a
    signal's handler (a stop) may run in the main thread while it holds the lock."""

    def __init__(self, log: Any) -> None:
        self.log, self.lock = log, threading.RLock()

    def __call__(self, text: str, stream: Any = None) -> None:
        with self.lock:
            print(text, file=stream or sys.stdout, flush=True)
            self.to_log((text + "\n").encode())

    def to_log(self, data: bytes) -> None:
        if self.log is not None:
            self.log.write(data)
            self.log.flush()


class Stopper:
    """Asks the command's process group to stop once (SIGTERM), kills it after the grace period."""

    def __init__(self, proc: subprocess.Popen[bytes], grace: float, say: _Say | None = None):
        self.proc, self.grace = proc, grace
        self.say = say or _Say(None)
        self.asked = threading.Event()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, why: str) -> None:
        if self.asked.is_set() or self.proc.poll() is not None:
            return
        self.asked.set()
        self.say(f"clustertune: {why}: SIGTERM to the command; SIGKILL in {self.grace:g} s if it is still running",
                 sys.stderr)
        self._signal(signal.SIGTERM)
        timer = threading.Timer(self.grace, self._signal, args=(signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def watch(self, stop_file: Path | None) -> None:
        """Poll the run's stop-request file (written by the batch shell, a cancel) until the command ends."""
        while self.proc.poll() is None:
            if stop_file is not None and stop_file.exists():
                self.stop("stop requested")
                return
            try:
                self.proc.wait(0.5)
            except subprocess.TimeoutExpired:
                pass


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    per_node = bool(args) and args[0] == "--per-node"
    slurm_ranks = bool(args) and args[0] == "--slurm-ranks"
    cmd = args[1:] if per_node or slurm_ranks else args
    env = dict(os.environ)
    if slurm_ranks:
        env.update(slurm_rank_env(env))
    if not cmd:
        print("clustertune: no command to run", file=sys.stderr)
        return 2
    run_dir = Path(env[RUN_DIR_ENV]).resolve() if env.get(RUN_DIR_ENV) else None
    if run_dir is not None:
        env[RUN_DIR_ENV] = str(run_dir)
        env.setdefault(CHECKPOINT_DIR_ENV, str(run_dir / CHECKPOINTS_DIR))
        Path(env[CHECKPOINT_DIR_ENV]).mkdir(parents=True, exist_ok=True)
        # Last on the path: an installed clustertune (same helper) wins where there is one.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(run_dir / LIB_DIR)) if p)
    rank = env.get("RANK")
    log = None
    if run_dir is not None and rank is not None and not per_node:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        log = (run_dir / "logs" / f"rank-{rank}.log").open("ab")
    say = _Say(log)
    if env.get(STAGE_ENV):
        # launch.stage: the node's first process copies, the others wait for its copies.
        try:
            env.update(stage(json.loads(env[STAGE_ENV]), env, first=per_node or env.get("LOCAL_RANK", "0") == "0",
                             say=say))
        except (OSError, ValueError, StageError) as exc:
            say(f"clustertune: launch.stage: {exc}", sys.stderr)
            return 1
    if per_node:
        cmd = fill_placeholders(cmd, env)
    # A Python script's print() reaches its log (and the terminal that follows it) as it is
    # printed, not in 8 KB blocks when the buffer fills: its stdout is a pipe here.
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env, preexec_fn=_die_with_parent)
    except OSError as exc:
        say(f"clustertune: cannot start {cmd[0]!r} on {socket.gethostname()}: {exc.strerror or exc}", sys.stdout)
        return 126 if isinstance(exc, PermissionError) else 127
    stopper = Stopper(proc, float(env.get(GRACE_ENV, "30")), say)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: stopper.stop(f"received {signal.Signals(s).name}"))
    threading.Thread(target=stopper.watch, args=(run_dir / STOP_FILE if run_dir else None,), daemon=True).start()
    # On the node's output (its log, what an SSH host or SLURM shows) each rank's lines carry its
    # rank, as `torchrun --tee` has them: the foreground then shows rank 0's alone (launch.tee)
    # and none of torchrun's, and a reader of a node log can tell the ranks apart. A rank's own
    # log has its lines as written.
    tag = f"[rank {rank}] ".encode() if rank is not None and not per_node else b""
    for line in iter(proc.stdout.readline if proc.stdout else (lambda: b""), b""):
        with say.lock:
            sys.stdout.buffer.write(tag + line)
            sys.stdout.buffer.flush()
            say.to_log(line)
    rc = proc.wait()
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
