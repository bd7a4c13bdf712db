"""Every benchmark still runs: each script in benchmarks/ at its ``--smoke`` size (a few steps of a
tiny model), so a change that breaks one fails here, not at the next measurement. A script that
must build something heavy is listed as run by hand, with the reason; the ones the GPU harness's
CPU rehearsal already runs are listed with it, and so is one that a test runs through its main().

This module runs the scripts that start ranks of their own (the ``ranks`` group: never beside
another multi-rank test); ``test_benchmark_smoke_one_process.py`` runs the others on the other
worker meanwhile."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.benchmark_smoke import BENCH, check_smoke_run, run_smoke
from tests.integration.test_benchmark_smoke_one_process import ONE_PROCESS

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

# Each starts two CPU ranks (torch.distributed.run) of its own, one side after another.
MULTI_RANK = ["frameworks.py", "launch.py", "fsdp_build_memory.py"]
# Run with --smoke by tests/integration/test_gpu_hour_rehearsal.py (gpu_hour.py --cpu --tiny; sft_gpu.py
# runs sft_cpu.py, gpu_check.py runs its --smoke size on CPU ranks, serve.py both servers on the CPU, fp8_check.py
# its bf16 side, the fp8 side refused there).
IN_REHEARSAL = {"gpu_hour.py", "gpu_check.py", "gpu_gpt2.py", "sft_cpu.py", "sft_gpu.py", "adapter_memory.py", "serve.py",
                "fp8_check.py"}
# Run at its --smoke size through its main() by test_tinker.py (the same loss at every step on both
# sides is that test's claim).
IN_TINKER_TEST = {"tinker_loop.py"}
BY_HAND = {
    "gguf_check.py": "builds llama.cpp from source (minutes) and needs an exported model",
    "faults.py": "kills SLURM nodes and SSH hosts mid-run and resumes on fewer: minutes on the test services",
}


def test_every_benchmark_has_a_smoke_run_or_a_reason() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")}
    listed = set(MULTI_RANK) | set(ONE_PROCESS) | IN_REHEARSAL | IN_TINKER_TEST | set(BY_HAND)
    assert scripts == listed, f"not listed: {sorted(scripts - listed)}; gone: {sorted(listed - scripts)}"
    assert not set(MULTI_RANK) & set(ONE_PROCESS), "a script is run by one of the two smoke modules, not both"


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every MULTI_RANK script run once, one at a time: each is two ranks, which the two cores
    already hold beside the other worker's test."""
    # frameworks.py at its smoke size is one 2-rank launch whose ranks run the five sides in turn
    # (DDP, Accelerate, DeepSpeed, Trainer, clustertune): about 11 s idle, against 55-65 s as five
    # launches.
    return run_smoke(MULTI_RANK, tmp_path_factory, at_once=1)


@pytest.mark.parametrize("script", sorted(MULTI_RANK))
def test_the_benchmark_runs_at_its_smoke_size(script: str,
                                              smoke_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    check_smoke_run(smoke_runs[script], script)


def test_every_framework_side_trains_the_same_loss_curve(smoke_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """Plain DDP, Accelerate, DeepSpeed, Trainer and clustertune on 2 CPU ranks: the same job gives
    the same losses step by step (the timings on CPU ranks are noise; the GPU script has the figures)."""
    out = smoke_runs["frameworks.py"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()
            if line.split() and line.split()[0] in ("ddp", "accelerate", "deepspeed", "trainer", "clustertune")
            and "tokens/s" not in line}
    assert set(rows) == {"ddp", "accelerate", "deepspeed", "trainer", "clustertune"}, out.stdout
    assert len({r[-1] for r in rows.values()}) == 1, rows  # one final loss, to 5 decimals
    assert "loss curves: the same on every side" in out.stdout
    assert "ratio clustertune / trainer:" in out.stdout
