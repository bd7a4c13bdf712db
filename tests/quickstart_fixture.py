"""The suite's one run of the embedded default (a few minutes on 2 cores), shared by the test
of the quickstart itself and by the SFT demo, which tunes the model it trains. It is trained once
per test run, whichever worker asks first (tests/workers.py), and only read afterwards."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli
from tests.workers import once_across_workers


@dataclass
class QuickstartRun:
    result: subprocess.CompletedProcess[str]
    runs_root: Path


def _train(root: Path) -> dict[str, Any]:
    res = cli("run", "quickstart", "--runs-root", str(root), timeout=900)
    return {"args": res.args, "returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr}


@pytest.fixture(scope="session")
def quickstart_cli_run(tmp_path_factory: pytest.TempPathFactory) -> QuickstartRun:
    root, res = once_across_workers(tmp_path_factory, "quickstart-runs", _train)
    return QuickstartRun(subprocess.CompletedProcess(res["args"], res["returncode"], res["stdout"], res["stderr"]), root)
