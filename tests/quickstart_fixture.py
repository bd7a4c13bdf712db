"""The suite's one run of the embedded default (a few minutes on 2 cores), shared by the test
of the quickstart itself and by the SFT demo, which tunes the model it trains. It is trained once
per test run, from the start, on the cores' spare time (tests/background.py), and only read
afterwards."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import background
from tests.helpers import cli


@dataclass
class QuickstartRun:
    result: subprocess.CompletedProcess[str]
    runs_root: Path


def train(root: Path, need: Any) -> dict[str, Any]:
    """The background job (tests/background.py): ``clustertune run quickstart`` into ``root``."""
    res = cli("run", "quickstart", "--runs-root", str(root), timeout=background.WAIT_S)
    return {"args": res.args, "returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr}


@pytest.fixture(scope="session")
def quickstart_cli_run(tmp_path_factory: pytest.TempPathFactory) -> QuickstartRun:
    root, res = background.result("quickstart", tmp_path_factory)
    return QuickstartRun(subprocess.CompletedProcess(res["args"], res["returncode"], res["stdout"], res["stderr"]), root)
