"""The suite writes nothing into the checkout: a file a test leaves there (a SLURM job's
``slurm-<id>.out`` in the directory it was submitted from, a run directory under ``./runs``) is
reported at the end and fails the run, before someone commits it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _untracked() -> set[str] | None:
    """Files in the checkout that git neither tracks nor ignores; None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "--others", "--exclude-standard"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(out.stdout.splitlines()) if out.returncode == 0 else None


class _Leftovers:
    def __init__(self) -> None:
        self.before = _untracked()
        self.new: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        after = _untracked()
        if self.before is None or after is None:
            return
        self.new = sorted(after - self.before)
        if self.new and exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.new:
            terminalreporter.section("files the tests left in the checkout (write them under tmp_path)", red=True)
            for name in self.new:
                terminalreporter.write_line(f"  {name}")


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller, once
        config.pluginmanager.register(_Leftovers(), "ct-leftovers")
