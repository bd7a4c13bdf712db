"""SIGKILL after a checkpoint, then `--resume`: the same weights and loss curve as a run that
was never interrupted. Also: a corrupt checkpoint stops the resume and names the file.

Both runs go through the real CLI in fresh processes with one torch thread each, so the
arithmetic is the same in both.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import yaml

from clustertune.runs import get_run
from clustertune.train.loop import KILL_AT_STEP_ENV
from tests.helpers import TINY_CAUSAL, cli, read_jsonl, with_

RECIPE = with_(TINY_CAUSAL, train={"max_steps": 14, "save_every": 6, "log_every": 4, "keep_last": 3})


def _weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def _only_run(root: Path) -> Path:
    (d,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
    return d


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root_a, root_b = tmp_path / "a", tmp_path / "b"

    a = cli("run", str(recipe_file), "--no-progress", "--runs-root", str(root_a))
    assert a.returncode == 0, a.stderr
    run_a = _only_run(root_a)

    # Killed at step 9: the checkpoint of step 6 exists, and the attempt already wrote the
    # metrics row of step 8, which must not survive into the resumed curve.
    b = cli("run", str(recipe_file), "--no-progress", "--runs-root", str(root_b), env={KILL_AT_STEP_ENV: "9"})
    assert b.returncode == -signal.SIGKILL, b.stderr
    run_b = _only_run(root_b)
    assert [p.name for p in (run_b / "checkpoints").iterdir()] == ["step-00000006"]
    assert 8 in [r["step"] for r in read_jsonl(run_b / "metrics.jsonl") if r["kind"] == "train"]

    status = cli("status", run_b.name, "--runs-root", str(root_b))
    assert status.returncode == 0 and "FAILED" in status.stdout  # the dead pid is noticed

    # A corrupt checkpoint stops the resume before anything changes, and names the file.
    weights = run_b / "checkpoints" / "step-00000006" / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:-8] + b"\0" * 8)
    before = (run_b / "run.json").read_bytes(), (run_b / "metrics.jsonl").read_bytes()
    bad = cli("run", "--resume", run_b.name, "--no-progress", "--runs-root", str(root_b))
    assert bad.returncode == 2
    assert str(weights) in bad.stderr and "corrupt" in bad.stderr and "Traceback" not in bad.stderr
    assert ((run_b / "run.json").read_bytes(), (run_b / "metrics.jsonl").read_bytes()) == before
    weights.write_bytes(good)

    resumed = cli("run", "--resume", run_b.name, "--no-progress", "--runs-root", str(root_b))
    assert resumed.returncode == 0, resumed.stderr

    info = json.loads((run_b / "run.json").read_text())
    assert info["state"] == "COMPLETED"
    assert [(x["n"], x["state"]) for x in info["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]
    assert info["attempts"][1]["resumed_from"] == "step-00000006"

    rows_a = read_jsonl(run_a / "metrics.jsonl")
    rows_b = read_jsonl(run_b / "metrics.jsonl")
    train_a = [(r["step"], r["loss"]) for r in rows_a if r["kind"] == "train"]
    train_b = [(r["step"], r["loss"]) for r in rows_b if r["kind"] == "train"]
    assert [s for s, _ in train_b] == [4, 8, 12, 14]  # no duplicate rows from the killed attempt
    for (sa, la), (sb, lb) in zip(train_a, train_b):
        assert sa == sb and lb == pytest.approx(la, rel=1e-6, abs=1e-6)
    eval_a = [r["eval_loss"] for r in rows_a if r["kind"] == "eval"]
    eval_b = [r["eval_loss"] for r in rows_b if r["kind"] == "eval"]
    assert eval_b == pytest.approx(eval_a, rel=1e-6)

    wa, wb = _weights(run_a / "model"), _weights(run_b / "model")
    assert wa.keys() == wb.keys()
    worst = max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)
    assert worst <= 1e-6, f"final weights differ by {worst}"

    # A completed run cannot be resumed again, and says so.
    again = cli("run", "--resume", run_b.name, "--runs-root", str(root_b))
    assert again.returncode == 2 and "COMPLETED" in again.stderr
    assert get_run(run_b.name, root_b).state.value == "COMPLETED"
