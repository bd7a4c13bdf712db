"""`clustertune exec` that cannot start its command on the hosts: a typed error (exit 2) naming
the host and why, and no run directory left behind (nothing ran, so there is nothing to keep)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from clustertune.cli.main import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_an_exec_that_cannot_start_leaves_no_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(runs))
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(tmp_path / "cfg"))
    port = _closed_port()
    assert main(["cluster", "add", "gone", f"127.0.0.1:{port}"]) == 0
    rc = main(["exec", "gone", "--", "echo", "hi"])
    err = capsys.readouterr().err
    assert rc == 2 and f"127.0.0.1:{port}: unreachable" in err and "Traceback" not in err, err
    assert not list(runs.glob("*/run.json")), "a run that never started was left behind"
    assert main(["runs", "--runs-root", str(runs)]) == 0 and "no runs yet" in capsys.readouterr().out
