"""The GPU machine's one command, rehearsed on CPU with tiny shapes: every part runs the same
scripts and code paths it runs on a GPU, results are written as they come (JSON and Markdown),
and each part either passes or says why it was skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

ROOT = Path(__file__).resolve().parents[2]


def test_the_cpu_rehearsal_runs_every_part(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1",
           "CLUSTERTUNE_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_hour.sh"), "--out", str(out), "--cpu", "--tiny",
                           "--budget", "600", "--wheels", str(tmp_path / "no-wheels")],
                          capture_output=True, text=True, timeout=720, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    rows = {(r["part"], r["check"]): r for r in data["rows"]}
    # Every part ran, in priority order, each with its seconds.
    assert [p["part"] for p in data["parts"]] == ["env", "correctness", "gpt2-speed", "sft-speed", "serve-speed",
                                                  "gpt2-modes", "more-checks", "qlora", "fp8", "cpu-adam"]
    assert all(p["note"] == "" for p in data["parts"]), data["parts"]
    assert data["machine"]["gpu"] == "none (CPU)" and data["machine"]["torch"]
    # The correctness rows are gpu_check.py's, read back from its own JSON.
    for check in ("fsdp: loss vs one-GPU fp32", "fsdp: resume", "fsdp: gathered model"):
        assert rows[("correctness", check)]["status"] == "PASS", rows[("correctness", check)]
    assert rows[("gpt2-speed", "ratio clustertune / Trainer")]["detail"].endswith("x")
    # The compile modes compile on a GPU only (CPU compiles take a minute each): a SKIP saying so.
    assert rows[("gpt2-modes", "compile modes side by side")]["status"] == "SKIP"
    assert rows[("sft-speed", "ratio clustertune / SFTTrainer")]["status"] == "PASS"
    assert rows[("qlora", "full, LoRA and QLoRA runs")]["status"] == "PASS"
    # FP8 on CPU ranks: the bf16 side trains and the fp8 side is refused, as a user without the GPU sees it.
    assert rows[("fp8", "bf16 run")]["status"] == "PASS" and "refused on this CPU" in rows[("fp8", "fp8 run")]["detail"]
    # The speed parts' scripts end with their headline ratio, as every benchmark does.
    for part in ("gpt2-speed", "sft-speed", "qlora"):
        last = (out / f"{part}.log").read_text().strip().splitlines()[-1]
        assert last.startswith("ratio="), (part, last)
    # Both servers answered at every level (serve.py's own JSON read back).
    for level in ("1", "4", "16"):
        row = rows[("serve-speed", f"{level} clients")]
        assert row["status"] == "PASS" and "transformers serve" in row["detail"] and "x); p50" in row["detail"], row
    # A SKIP always says why.
    skips = [r for r in data["rows"] if r["status"] == "SKIP"]
    assert skips and all(len(r["detail"]) > 20 for r in skips)
    assert "no wheels" not in rows[("env", "install wheels")]["detail"]  # a rehearsal installs nothing
    md = (out / "results.md").read_text()
    assert "| correctness | fsdp: resume | PASS |" in md and "| sft-speed |" in md


def test_a_part_that_no_longer_fits_the_budget_is_a_skip_row(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_hour
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    code = gpu_hour.main(["--out", str(tmp_path), "--cpu", "--tiny", "--budget", "0", "--only", "qlora"])
    data = json.loads((tmp_path / "results.json").read_text())
    assert code == 0
    assert [(r["part"], r["status"]) for r in data["rows"]] == [("env", "SKIP"), ("qlora", "SKIP")]
    assert "budget" in data["rows"][-1]["detail"]
