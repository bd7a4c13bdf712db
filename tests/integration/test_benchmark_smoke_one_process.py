"""Every benchmark that runs as one process (with the servers or sshd it starts itself) still runs
at its ``--smoke`` size. The scripts run one after another as a background job (tests/background.py),
on the cores' spare time from the start of the session; the tests read their results. The
multi-rank ones are ``test_benchmark_smoke.py``'s (which also checks that every script is listed
somewhere)."""

from __future__ import annotations

import subprocess

import pytest

from pathlib import Path
from typing import Any

from tests import background
from tests.integration.benchmark_smoke import check_smoke_run, from_json, run_smoke, to_json

ONE_PROCESS = ["fused_loss.py", "health_latency.py", "largest_model.py", "loader.py", "parity_run_clm.py", "prepare.py",
               "prepare_memory.py", "remote_call.py", "rl_offline.py", "sft_prepare.py",
               "sft_recall.py", "stage.py", "stream_prefetch.py", "tinker_loop.py", "train_cpu.py"]


def run_all(where: Path, need: Any) -> dict[str, Any]:
    """The background job: every script, one at a time (each mostly one process's start-up and a
    few steps on one core). Its limits allow for a run on spare time only."""
    return to_json(run_smoke(ONE_PROCESS, where, at_once=1, limits=dict.fromkeys(ONE_PROCESS, background.WAIT_S)))


@pytest.fixture(scope="module")
def one_process_smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    return from_json(background.result("smokes", tmp_path_factory)[1])


@pytest.mark.parametrize("script", sorted(ONE_PROCESS))
def test_the_benchmark_runs_at_its_smoke_size(
        script: str, one_process_smoke_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    check_smoke_run(one_process_smoke_runs[script], script)
