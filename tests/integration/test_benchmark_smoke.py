"""Every benchmark still runs: each script in benchmarks/ at its ``--smoke`` size (a few steps of a
tiny model), so a change that breaks one fails here, not at the next measurement. A script that
must build something heavy is listed as run by hand, with the reason; the ones the GPU harness's
CPU rehearsal already runs are listed with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

# script -> extra arguments beside --smoke
SMOKE: dict[str, list[str]] = {
    "fsdp_build_memory.py": [], "largest_model.py": [], "launch.py": [], "loader.py": [],
    "parity_run_clm.py": [], "prepare.py": [], "prepare_memory.py": [], "remote_call.py": [],
    "rl_offline.py": [], "serve.py": [], "sft_prepare.py": [], "stage.py": [],
    "stream_prefetch.py": [], "train_cpu.py": [],
}
# Run with --smoke by tests/integration/test_gpu_hour_rehearsal.py (gpu_hour.py --cpu --tiny; sft_gpu.py
# runs sft_cpu.py, gpu_check.py runs its --smoke size on CPU ranks).
IN_REHEARSAL = {"gpu_hour.py", "gpu_check.py", "gpu_gpt2.py", "sft_cpu.py", "sft_gpu.py", "adapter_memory.py"}
BY_HAND = {
    "gguf_check.py": "builds llama.cpp from source (minutes) and needs an exported model",
    "faults.py": "kills SLURM nodes and SSH hosts mid-run and resumes on fewer: minutes on the test services",
}


def test_every_benchmark_has_a_smoke_run_or_a_reason() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")}
    listed = set(SMOKE) | IN_REHEARSAL | set(BY_HAND)
    assert scripts == listed, f"not listed: {sorted(scripts - listed)}; gone: {sorted(listed - scripts)}"


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_the_benchmark_runs_at_its_smoke_size(script: str, tmp_path: Path) -> None:
    env = {**os.environ, "CLUSTERTUNE_CACHE": str(tmp_path / "cache"), "CLUSTERTUNE_RUNS": str(tmp_path / "runs"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([sys.executable, str(BENCH / script), "--smoke", *SMOKE[script]], capture_output=True,
                         text=True, timeout=180, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert out.stdout.strip(), "a benchmark prints its figures"
