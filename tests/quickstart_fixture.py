"""The suite's one run of the embedded default, shared by the test of the quickstart itself and by
the SFT demo, which tunes the model it trains. It is trained once per test run, whichever worker
asks first (tests/workers.py), and only read afterwards.

At half the README's steps (100 of 200, evaluated and saved every 25): under a minute on 2
idle cores instead of two, and it still shows every claim its readers check: perplexity falls
9.4x (4,307 -> 457), the SFT demo lifts exact match 0.00 -> 0.79 on it, the three-turn recall
0.00 -> 0.93 in 300 steps (benchmarks/RESULTS.md)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli
from tests.workers import once_across_workers


HALF = ("train.max_steps=100", "train.eval_every=25", "train.save_every=25")


@dataclass
class QuickstartRun:
    result: subprocess.CompletedProcess[str]
    runs_root: Path


def _train(root: Path) -> dict[str, Any]:
    res = cli("run", "quickstart", *HALF, "--runs-root", str(root), timeout=900)
    return {"args": res.args, "returncode": res.returncode, "stdout": res.stdout, "stderr": res.stderr}


@pytest.fixture(scope="session")
def quickstart_cli_run(tmp_path_factory: pytest.TempPathFactory) -> QuickstartRun:
    root, res = once_across_workers(tmp_path_factory, "quickstart-runs", _train)
    return QuickstartRun(subprocess.CompletedProcess(res["args"], res["returncode"], res["stdout"], res["stderr"]), root)
