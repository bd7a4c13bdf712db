"""`benchmarks/prepare.py` at its smallest size still runs to its ratio line: the benchmark reads
the cache's own records, so a change to them that it did not follow fails here, not at the next
measurement."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "prepare.py"


def test_the_prepare_benchmark_runs_at_its_smallest_size(tmp_path: Path) -> None:
    env = {**os.environ, "CLUSTERTUNE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, str(SCRIPT), "--repeat", "1", "--rounds", "1"], capture_output=True,
                         text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ratio = [line for line in out.stdout.splitlines() if line.startswith("ratio=")]
    assert ratio and float(ratio[-1].split("=")[1]) > 0
