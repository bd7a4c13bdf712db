"""A real terminal for the interactive commands: a tmux server on its own socket, one detached
session per test, keys sent as a person types them and the screen read back.

Without ``tmux`` (Debian package tmux) the tests that use it skip, unless
CLUSTERTUNE_REQUIRE_SERVICES=1 (CI), where they fail.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HOW_TO_ENABLE = "install it with `bash scripts/ci/install_tmux.sh` (as root: apt-get install tmux)"


class Terminal:
    """One tmux session running one command; ``exit_code`` once the command has ended."""

    def __init__(self, root: Path):
        self.socket, self.rc_file = root / "tmux.sock", root / "exit-code"

    def _tmux(self, *args: str) -> str:
        res = subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    def start(self, argv: list[str], env: dict[str, str], width: int = 220, height: int = 50) -> None:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        line = f"env {exports} {shlex.join(argv)}; echo $? > {shlex.quote(str(self.rc_file))}"
        self._tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), line)

    def send(self, *keys: str) -> None:
        """Keys as tmux names them: literal text, Enter, C-c, C-d."""
        self._tmux("send-keys", "-t", "t", *keys)

    def type_line(self, text: str) -> None:
        self._tmux("send-keys", "-t", "t", "-l", text)
        self.send("Enter")

    def screen(self) -> str:
        """What the terminal shows, wrapped lines joined, trailing blanks dropped."""
        res = subprocess.run(["tmux", "-S", str(self.socket), "capture-pane", "-p", "-J", "-t", "t", "-S", "-"],
                             capture_output=True, text=True, timeout=30)
        if res.returncode == 0:  # else the session has ended: what it showed last
            self.last_screen = "\n".join(line.rstrip() for line in res.stdout.splitlines()).rstrip("\n")
        return self.last_screen

    def _alive(self) -> bool:
        return subprocess.run(["tmux", "-S", str(self.socket), "has-session", "-t", "t"],
                              capture_output=True).returncode == 0

    def wait_for(self, predicate, what: str, timeout: float = 90) -> str:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.screen()
            if predicate(shown):
                return shown
            if not self._alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"the terminal never showed {what}; it shows:\n{self.screen()}")

    @property
    def exit_code(self) -> int | None:
        try:
            return int(self.rc_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def wait_exit(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (rc := self.exit_code) is not None:
                return rc
            time.sleep(0.1)
        raise AssertionError(f"the command did not end; the terminal shows:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)

    last_screen = ""


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        message = "tmux is not installed"
        if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{message}; CLUSTERTUNE_REQUIRE_SERVICES=1 requires it", pytrace=False)
        pytest.skip(f"{message}; {HOW_TO_ENABLE}")
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.close()
