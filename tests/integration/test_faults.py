"""Faults injected into real training processes (clustertune.train.faults): a rank SIGKILLed in
the middle of a step or while a checkpoint is written, a rank that segfaults, a rank that hangs
while the others wait in a collective, and a SLURM job cancelled with scancel.

Whatever the fault, a run that goes on at the same world size ends with the weights of a run
that was never interrupted (bit-exact in one process, within 1e-6 across two ranks), and redoes
at most one checkpoint interval of steps. Every run goes through the real CLI in fresh processes
with one torch thread per rank, so the arithmetic is the same in the faulted and the reference run.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustertune.train.faults import FAULT_ENV, ONCE_ENV
from clustertune.runs.sealed import list_checkpoints
from clustertune.runs.paths import RunPaths
from tests.helpers import (TINY_CAUSAL, cli, read_jsonl, start_and_inject, steps_redone, weight_difference,
                           with_)

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

SAVE_EVERY = 3
TRAIN = {"max_steps": 9, "log_every": 1, "save_every": SAVE_EVERY, "keep_last": 3, "eval_at_start": False}
ONE = with_(TINY_CAUSAL, train=TRAIN)
NO_DROPOUT = {**TINY_CAUSAL["model"]["config_overrides"], "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
TWO = with_(TINY_CAUSAL, model={"config_overrides": NO_DROPOUT}, train={**TRAIN, "batch_size": 4},
            launch={"procs_per_node": 2})


def _write(path: Path, recipe: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(recipe))
    return path


def _only_run(root: Path) -> Path:
    (d,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
    return d


def _info(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def _train_steps(run_dir: Path) -> list[int]:
    return [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"]


def _run(recipe_file: Path, root: Path, *overrides: str, env: dict[str, str] | None = None) -> tuple[Any, Path]:
    out = cli("run", str(recipe_file), *overrides, "--no-progress", "--runs-root", str(root), env=env)
    return out, _only_run(root)


@pytest.fixture(scope="module")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fault-recipes")
    return {"one": _write(d / "one.yaml", ONE), "two": _write(d / "two.yaml", TWO)}


@pytest.fixture(scope="module")
def reference(recipes: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The uninterrupted runs every faulted run is compared with: one process, and two ranks."""
    runs = {}
    for name in ("one", "two"):
        out, run_dir = _run(recipes[name], tmp_path_factory.mktemp(f"reference-{name}"))
        assert out.returncode == 0, out.stderr
        runs[name] = run_dir
    return runs


def _resume(run_dir: Path, *overrides: str) -> None:
    out = cli("run", "--resume", run_dir.name, *overrides, "--no-progress", "--runs-root", str(run_dir.parent))
    assert out.returncode == 0, out.stdout + out.stderr
    assert _info(run_dir)["state"] == "COMPLETED"


def test_kill_in_the_middle_of_a_step_then_resume_is_bit_exact(recipes: dict[str, Path], reference: dict[str, Path],
                                                               tmp_path: Path) -> None:
    # SIGKILL after step 8's forward, before its backward: checkpoints of steps 3 and 6 exist.
    out, run_dir = _run(recipes["one"], tmp_path, env={FAULT_ENV: "kill:0:8:backward"})
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert [p.name for p in list_checkpoints(RunPaths(run_dir))] == ["step-00000003", "step-00000006"]
    assert _train_steps(run_dir) == list(range(1, 8))  # step 7 was logged, step 8 never finished

    _resume(run_dir)
    info = _info(run_dir)
    assert [a["state"] for a in info["attempts"]] == ["FAILED", "COMPLETED"]
    assert info["attempts"][1]["resumed_from"] == "step-00000006"
    assert steps_redone(run_dir) == [1]  # step 7, at most one checkpoint interval
    assert _train_steps(run_dir) == list(range(1, 10))
    losses = lambda d: [r["loss"] for r in read_jsonl(d / "metrics.jsonl") if r["kind"] == "train"]  # noqa: E731
    assert losses(run_dir) == losses(reference["one"])
    assert weight_difference(run_dir, reference["one"]) == 0.0


def test_kill_while_a_checkpoint_is_written_resumes_from_the_newest_complete_one(
        recipes: dict[str, Path], reference: dict[str, Path], tmp_path: Path) -> None:
    # SIGKILL once step 6's checkpoint files are on disk but before they are sealed.
    out, run_dir = _run(recipes["one"], tmp_path, env={FAULT_ENV: "kill:0:6:checkpoint"})
    assert out.returncode == -signal.SIGKILL, out.stderr
    paths = RunPaths(run_dir)
    partial = paths.checkpoints / ".tmp-step-00000006"
    assert partial.is_dir() and any(partial.iterdir())  # the half-written checkpoint is there
    assert [p.name for p in list_checkpoints(paths)] == ["step-00000003"]

    _resume(run_dir)
    assert _info(run_dir)["attempts"][1]["resumed_from"] == "step-00000003"
    assert not partial.exists()  # removed when the run started again
    assert steps_redone(run_dir) == [SAVE_EVERY]  # steps 4-6: one checkpoint interval
    assert weight_difference(run_dir, reference["one"]) == 0.0


def test_kill_of_one_rank_mid_step_is_restarted_by_torchrun(recipes: dict[str, Path], reference: dict[str, Path],
                                                            tmp_path: Path) -> None:
    once = tmp_path / "fired"
    out, run_dir = _run(recipes["two"], tmp_path / "runs", "launch.max_restarts=1",
                        env={FAULT_ENV: "kill:1:8:backward", ONCE_ENV: str(once)})
    assert once.exists()  # the fault did fire
    assert out.returncode == 0, out.stdout + out.stderr
    info = _info(run_dir)
    assert info["state"] == "COMPLETED" and info["attempts"][-1]["resumed_from"] == "step-00000006"
    # Rank 0 saw its peer vanish in the all-reduce and recorded that; the restart opened another attempt.
    assert [a["state"] for a in info["attempts"]] == ["FAILED", "COMPLETED"]
    assert steps_redone(run_dir) == [1]
    assert _train_steps(run_dir) == list(range(1, 10))
    assert weight_difference(run_dir, reference["two"]) <= 1e-6


def test_a_rank_that_segfaults_fails_the_run_naming_the_rank_and_signal(recipes: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    out, run_dir = _run(recipes["two"], tmp_path, env={FAULT_ENV: "segfault:1:4:backward"})
    assert out.returncode != 0
    info = _info(run_dir)
    assert info["state"] == "FAILED"
    # The cause first (rank 0 only saw its peer vanish in the all-reduce), then the consequence.
    assert info["reason"].startswith("rank 1 died of SIGSEGV (signal 11)"), info["reason"]
    assert "rank-1.log" in info["reason"]
    log = (run_dir / "logs" / "rank-1.log").read_text()
    assert "Segmentation fault" in log and "in train_loop" in log  # the Python stack when it crashed
    assert [p.name for p in list_checkpoints(RunPaths(run_dir))] == ["step-00000003"]


def test_a_rank_hung_in_a_collective_is_failed_by_the_watchdog_and_restarted(
        recipes: dict[str, Path], reference: dict[str, Path], tmp_path: Path) -> None:
    # Rank 1 stops for good before step 5's backward; rank 0 waits in that backward's gradient
    # all-reduce. The watchdog (9 s without a step) dumps both stacks and fails them; torchrun
    # restarts both, and they resume from step 3. It counts between steps only (armed by the
    # first, held off over evaluations and checkpoints), where a step of this model takes
    # milliseconds, so 9 s cannot fire on a busy machine unless a rank is stuck.
    once = tmp_path / "fired"
    out, run_dir = _run(recipes["two"], tmp_path / "runs", "launch.max_restarts=1", "launch.watchdog_minutes=0.15",
                        env={FAULT_ENV: "hang:1:5:backward", ONCE_ENV: str(once)})
    assert once.exists()
    assert out.returncode == 0, out.stdout + out.stderr
    logs = run_dir / "logs"
    hung, waiting = (logs / "rank-1.log").read_text(), (logs / "rank-0.log").read_text()
    assert "Timeout (0:00:09)!" in hung and "faults.py" in hung
    assert "Timeout (0:00:09)!" in waiting and " in backward" in waiting  # stuck in the collective
    info = _info(run_dir)
    assert info["state"] == "COMPLETED" and info["attempts"][-1]["resumed_from"] == "step-00000003"
    assert steps_redone(run_dir) == [1]
    assert weight_difference(run_dir, reference["two"]) <= 1e-6


@pytest.mark.usefixtures("slurm_cluster")
def test_scancel_of_a_running_slurm_job_then_resume(tmp_path: Path) -> None:
    from clustertune.launch import job_for
    from clustertune import api
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.store import get_run

    train = {**TRAIN, "max_steps": 120, "save_every": 20}
    root = tmp_path / "runs"
    recipe = load_recipe(with_(ONE, train=train, launch={"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1}))

    def scancel(run: Any) -> None:
        subprocess.run(["scancel", job_for(run).job_id], check=True, timeout=30)

    run = start_and_inject(lambda: api.run(recipe, runs_root_dir=root), lambda r: r.paths.metrics, 3, scancel)
    state = job_for(run).wait(timeout=120)
    run.reload()
    # scancel's SIGTERM reaches the batch shell and the rank: a checkpoint at the next step, and
    # the run is PREEMPTED (not CANCELLED: the user cancelled the job, not the run), so it resumes.
    assert state.value == "PREEMPTED" and "SIGTERM" in run.info.reason, run.info.reason
    stopped = int(run.info.reason.split("at step ")[1].split(";")[0])
    assert 3 <= stopped < train["max_steps"] and max(_train_steps(run.paths.root)) == stopped

    out = cli("run", "--resume", run.id, "--runs-root", str(root))
    assert out.returncode == 0 and "submitted" in out.stdout, out.stdout + out.stderr
    run = get_run(run.id, root)
    assert job_for(run).wait(timeout=300).value == "COMPLETED", job_for(run).logs()
    assert run.attempts[-1].resumed_from == f"step-{stopped:08d}"
    assert steps_redone(run.paths.root) == [0]  # the stop wrote a checkpoint of the step it stopped at
    assert _train_steps(run.paths.root) == list(range(1, train["max_steps"] + 1))

    plain_file = _write(tmp_path / "plain.yaml", with_(ONE, train=train))
    plain, plain_dir = _run(plain_file, tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    assert weight_difference(run.paths.root, plain_dir) == 0.0
