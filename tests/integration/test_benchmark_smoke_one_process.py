"""Every benchmark that runs as one process (with the servers or sshd it starts itself) still runs
at its ``--smoke`` size. Not in the ``ranks`` group: these run on the other worker while the
multi-rank ones (``test_benchmark_smoke.py``, which also checks that every script is listed
somewhere) hold the ranks worker."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.benchmark_smoke import check_smoke_run, run_smoke

ONE_PROCESS = ["fused_loss.py", "health_latency.py", "host_malloc.py", "largest_model.py", "loader.py", "parity_run_clm.py", "prepare.py",
               "prepare_memory.py", "remote_call.py", "rl_offline.py", "sft_prepare.py",
               "sft_recall.py", "stage.py", "stream_prefetch.py", "train_cpu.py"]


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Two at a time: each is mostly one process's start-up and a few steps on one core. The
    slowest first, so the pair finishes together."""
    order = sorted(ONE_PROCESS, key=lambda s: s not in ("rl_offline.py", "loader.py", "train_cpu.py"))
    return run_smoke(order, tmp_path_factory, at_once=2)


@pytest.mark.parametrize("script", sorted(ONE_PROCESS))
def test_the_benchmark_runs_at_its_smoke_size(script: str,
                                              smoke_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    check_smoke_run(smoke_runs[script], script)
