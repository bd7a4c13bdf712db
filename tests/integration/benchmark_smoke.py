"""Running benchmarks/ scripts at their ``--smoke`` size for the suite: each in a folder of its
own (cache, runs, temp dir), with what it left running found afterwards. Used by the two smoke
modules: the scripts that start ranks of their own, and those that run as one process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def run_smoke(scripts: list[str], tmp_path_factory: pytest.TempPathFactory, at_once: int,
              limits: dict[str, float] | None = None) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each script run once with ``--smoke``, ``at_once`` at a time, in the order given."""

    def one(script: str) -> subprocess.CompletedProcess[str]:
        where = tmp_path_factory.mktemp(script.removesuffix(".py"))
        (where / "tmp").mkdir()
        env = {**os.environ, "CLUSTERTUNE_CACHE": str(where / "cache"), "CLUSTERTUNE_RUNS": str(where / "runs"),
               "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "TMPDIR": str(where / "tmp"),
               # Beside another script or the other worker's test: torch's default of a thread per
               # core would put several spinning threads on each core of the machine.
               "OMP_NUM_THREADS": "1"}
        timeout = (limits or {}).get(script, 240)
        try:
            out = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], capture_output=True,
                                 text=True, timeout=timeout, env=env, cwd=where)
        except subprocess.TimeoutExpired as exc:
            text = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            out = subprocess.CompletedProcess(exc.cmd, -9, text, f"timed out after {exc.timeout} s")
        out.left_behind = left_behind(where)  # type: ignore[attr-defined]
        return out

    with ThreadPoolExecutor(max_workers=at_once) as pool:
        return dict(zip(scripts, pool.map(one, scripts)))


# Benchmarks whose last line is not ``ratio=X`` at the smoke size, and why. Every other one ends
# with its headline ratio (its docstring says which way it points), so a figure can be read off
# the last line of any run.
NO_RATIO = {
    "health_latency.py": "a latency bound (/health while a request is answered), no peer side",
    "sft_recall.py": "held-out recall of three setups, not a speed",
    "fsdp_build_memory.py": "host memory per rank of one setup, no peer side",
    "rl_offline.py": "its smoke size runs the shipped settings alone; the full run ends with ratio=",
    "largest_model.py": "its smoke size climbs too few sizes to compare; the full run ends with ratio=",
    "serve.py": "one clients=N ratio=X line per level",
}


def check_smoke_run(out: subprocess.CompletedProcess[str], script: str) -> None:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert out.stdout.strip(), "a benchmark prints its figures"
    assert out.left_behind == [], "processes the benchmark started are still running after it ended"  # type: ignore[attr-defined]
    if script not in NO_RATIO:
        last = out.stdout.strip().splitlines()[-1]
        assert last.startswith("ratio="), f"{script}'s last line is {last!r}, not ratio=X"
        float(last.removeprefix("ratio=").split()[0])  # a number (what it divides may follow)


def left_behind(where: Path, grace: float = 10.0) -> list[str]:
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
