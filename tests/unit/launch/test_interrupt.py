"""Ctrl-C while torchrun's ranks train: the first asks them to save and stop; a second ends
torchrun and every rank at once, each rank in a session of its own as torchrun starts them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from clustertune.launch.local import descendants, end_after_interrupt, kill_tree

# A stand-in for torchrun: two "ranks", each in a new session, that ignore SIGINT and SIGTERM
# (ranks busy saving a large checkpoint); it writes their pids and waits for them.
LAUNCHER = """
import signal, subprocess, sys, time
rank = "import signal, time\\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\ntime.sleep(600)"
signal.signal(signal.SIGINT, signal.SIG_IGN)
ranks = [subprocess.Popen([sys.executable, "-c", rank], start_new_session=True) for _ in range(2)]
open(sys.argv[1], "w").write(" ".join(str(r.pid) for r in ranks))
for r in ranks:
    r.wait()
"""


def start_tree(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    pids = tmp_path / "pids"
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(pids)], start_new_session=True)
    deadline = time.monotonic() + 60
    while not pids.is_file() or len(pids.read_text().split()) < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    return proc, [int(p) for p in pids.read_text().split()]


def dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # killed, not yet reaped by its parent
    except FileNotFoundError:
        return True


def gone(pid: int) -> bool:
    """Dead, once the SIGKILL sent to it has been delivered (a moment on a busy machine)."""
    deadline = time.monotonic() + 30
    while not dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return dead(pid)


def test_a_second_ctrl_c_kills_torchrun_and_every_rank_at_once(tmp_path: Path) -> None:
    proc, ranks = start_tree(tmp_path)
    assert set(ranks) <= set(descendants(proc.pid))
    asked: list[bool] = []

    def ask() -> None:
        proc.send_signal(signal.SIGINT)  # what the first Ctrl-C passes on: ignored by these ranks
        asked.append(True)
        # The user presses Ctrl-C again while the launcher waits.
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

    try:
        end_after_interrupt(proc, ask, grace=600)  # without the second Ctrl-C: ten minutes
    finally:
        kill_tree(proc.pid)
    assert asked and proc.returncode == -signal.SIGKILL
    assert all(gone(r) for r in ranks)  # not left training as orphans


def test_ranks_that_stop_when_asked_are_not_killed(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    end_after_interrupt(proc, proc.terminate, grace=60)
    assert proc.returncode == -signal.SIGTERM
