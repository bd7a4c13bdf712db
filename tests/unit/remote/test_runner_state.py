"""The host helper's run states on one host, in-process: a process found gone is FAILED, unless a
cancel marked the run first (a status or follower racing the cancel must not record FAILED)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clustertune.remote import runner


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _running(rdir: Path) -> None:
    rdir.mkdir(parents=True)
    (rdir / "state.json").write_text(json.dumps({"state": "RUNNING", "pid": _dead_pid(), "kind": "call"}))


def test_a_process_gone_without_reporting_is_failed(tmp_path: Path) -> None:
    _running(tmp_path / "a")
    st = runner._status(str(tmp_path / "a"))
    assert st["state"] == "FAILED" and "ended without reporting" in st["reason"]


def test_a_process_gone_after_a_cancel_marked_it_is_cancelled_and_stays_so(tmp_path: Path) -> None:
    _running(tmp_path / "b")
    (tmp_path / "b" / runner.CANCEL_MARK).write_text("")
    assert runner._status(str(tmp_path / "b"))["state"] == "CANCELLED"
    runner._set_state(str(tmp_path / "b"), "FAILED", reason="late")  # the first terminal state wins
    assert json.loads((tmp_path / "b" / "state.json").read_text())["state"] == "CANCELLED"
