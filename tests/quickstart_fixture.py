"""The suite's one run of the embedded default (a few minutes on 2 cores), shared by the test
of the quickstart itself and by the SFT demo, which tunes the model it trains."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import cli


@dataclass
class QuickstartRun:
    result: subprocess.CompletedProcess[str]
    runs_root: Path


@pytest.fixture(scope="session")
def quickstart_cli_run(tmp_path_factory: pytest.TempPathFactory) -> QuickstartRun:
    root = tmp_path_factory.mktemp("quickstart-runs")
    return QuickstartRun(cli("run", "quickstart", "--runs-root", str(root), timeout=900), root)
