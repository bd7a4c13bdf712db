"""Every benchmark still runs: each script in benchmarks/ at its ``--smoke`` size (a few steps of a
tiny model), so a change that breaks one fails here, not at the next measurement. A script that
must build something heavy is listed as run by hand, with the reason; the ones the GPU harness's
CPU rehearsal already runs are listed with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

# script -> extra arguments beside --smoke
SMOKE: dict[str, list[str]] = {
    "frameworks.py": [], "fsdp_build_memory.py": [], "health_latency.py": [], "largest_model.py": [], "launch.py": [], "loader.py": [],
    "parity_run_clm.py": [], "prepare.py": [], "prepare_memory.py": [], "remote_call.py": [],
    "rl_offline.py": [], "serve.py": [], "sft_prepare.py": [], "sft_recall.py": [], "stage.py": [],
    "stream_prefetch.py": [], "tinker_loop.py": [], "train_cpu.py": [],
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


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every SMOKE script run once, two at a time: each is mostly one process's start-up and a
    few steps on one core, so the second core would otherwise sit idle for minutes of CI."""
    # frameworks.py is five 2-rank runs one after another (DDP, Accelerate, DeepSpeed, Trainer,
    # clustertune): beside a second script and the other worker it took past 240 s twice, four
    # sides done, on 2026-12-01.
    LIMITS = {"frameworks.py": 480}

    def one(script: str) -> subprocess.CompletedProcess[str]:
        where = tmp_path_factory.mktemp(script.removesuffix(".py"))
        (where / "tmp").mkdir()
        env = {**os.environ, "CLUSTERTUNE_CACHE": str(where / "cache"), "CLUSTERTUNE_RUNS": str(where / "runs"),
               "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "TMPDIR": str(where / "tmp"),
               # Two scripts at once beside the other worker's test: torch's default of a thread per
               # core would put three times as many spinning threads as cores on the machine.
               "OMP_NUM_THREADS": "1"}
        try:
            out = subprocess.run([sys.executable, str(BENCH / script), "--smoke", *SMOKE[script]], capture_output=True,
                                 text=True, timeout=LIMITS.get(script, 240), env=env, cwd=where)
        except subprocess.TimeoutExpired as exc:
            text = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            out = subprocess.CompletedProcess(exc.cmd, -9, text, f"timed out after {exc.timeout} s")
        out.left_behind = _left_behind(where)  # type: ignore[attr-defined]
        return out

    # The slowest first, so the pair finishes together.
    order = sorted(SMOKE, key=lambda s: s not in ("frameworks.py", "rl_offline.py", "loader.py", "launch.py"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(order, pool.map(one, order)))


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_the_benchmark_runs_at_its_smoke_size(script: str,
                                              smoke_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    out = smoke_runs[script]
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert out.stdout.strip(), "a benchmark prints its figures"
    assert out.left_behind == [], "processes the benchmark started are still running after it ended"


def _left_behind(where: Path, grace: float = 10.0) -> list[str]:
    """The command lines of processes still running that name ``where`` (the benchmark's own
    folder and temp dir: a server, an sshd, a worker it started), after ``grace`` seconds to exit."""
    deadline = time.monotonic() + grace
    while True:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:  # gone meanwhile, or not a process
                continue
            line = " ".join(a.decode(errors="replace") for a in argv if a)
            if str(where) in line:
                found.append(line)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


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
