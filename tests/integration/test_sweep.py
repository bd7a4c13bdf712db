"""Sweeps here, as a user runs them: a 2 x 2 grid on the quickstart whose sweep process dies in
its first trial, `sweep resume` that finishes it from its checkpoint and runs the rest, the table,
its JSON and its plot; and `cancel ID`, which ends the running trial and starts no other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.helpers import TINY_CAUSAL, cli, cli_here, read_jsonl, wait_for_step, with_

GRID = ["train.lr=1e-3,3e-3", "train.seed=0,1", "train.max_steps=4", "train.eval_every=2", "train.save_every=2",
        "data.max_eval_samples=32"]


def _sweep_dir(root: Path, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list((root / "sweeps").glob("*/sweep.json"))
        if found:
            return found[0].parent
        time.sleep(0.1)
    raise AssertionError(f"no sweep directory under {root} after {timeout} s")


def _trial_run(sweep_dir: Path, index: int, timeout: float = 120) -> str:
    """The run a trial became: sweep.json names it once the trial's run is made, a moment after
    the sweep itself is written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        trials = json.loads((sweep_dir / "sweep.json").read_text())["trials"]
        if len(trials) > index and trials[index].get("run_id"):
            return trials[index]["run_id"]
        time.sleep(0.1)
    raise AssertionError(f"trial {index} of {sweep_dir} has no run after {timeout} s")


def test_a_grid_killed_in_its_first_trial_resumes_and_ranks_its_trials(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    # The sweep's own process dies (SIGKILL) at step 3 of trial 0, after its step-2 checkpoint.
    env = {"CLUSTERTUNE_FAULT": "kill:0:3:step", "CLUSTERTUNE_FAULT_ONCE": str(tmp_path / "once")}
    first = cli("sweep", "quickstart", *GRID, "--runs-root", str(root), env=env, timeout=600)
    assert first.returncode == -9, first.stderr[-3000:]
    sweep_id = _sweep_dir(root).name
    report = json.loads(cli_here("sweep", "show", sweep_id, "--json", "--runs-root", str(root)).stdout)
    assert [r["state"] for r in report["trials"]] == ["FAILED", "NOT STARTED", "NOT STARTED", "NOT STARTED"]
    assert report["winner"] is None

    again = cli_here("sweep", "resume", sweep_id, "--runs-root", str(root))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming trial(s) 0, 1, 2, 3" in again.stderr
    report = json.loads(cli_here("sweep", "show", sweep_id, "--json", "--runs-root", str(root)).stdout)
    trials = report["trials"]
    assert [r["state"] for r in trials] == ["COMPLETED"] * 4 and [r["steps"] for r in trials] == [4] * 4
    assert [r["overrides"] for r in trials] == [{"train.lr": lr, "train.seed": s} for lr in ("1e-3", "3e-3") for s in "01"]

    # Each trial is an ordinary run; the winner is the lowest eval loss among the runs' own summaries.
    finals = {}
    for r in trials:
        run_dir = root / r["run_id"]
        info = json.loads((run_dir / "run.json").read_text())
        assert info["sweep"] == {"id": sweep_id, "trial": r["trial"], "overrides": r["overrides"]}
        recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text())
        assert (recipe["train"]["lr"], recipe["train"]["seed"]) == (float(r["overrides"]["train.lr"]), int(r["overrides"]["train.seed"]))
        finals[r["run_id"]] = json.loads((run_dir / "summary.json").read_text())["final_eval"]["eval_loss"]
        assert r["metric"] == finals[r["run_id"]]
    best = min(finals, key=finals.__getitem__)
    assert report["winner"] == {"trial": next(r["trial"] for r in trials if r["run_id"] == best), "run_id": best,
                                "eval_loss": finals[best]}
    assert [r["winner"] for r in trials].count(True) == 1

    # Trial 0 finished from its checkpoint: a second attempt, no step trained twice.
    run0 = json.loads((root / trials[0]["run_id"] / "run.json").read_text())
    assert len(run0["attempts"]) == 2 and run0["attempts"][1]["resumed_from"] == "step-00000002"
    steps = [m["step"] for m in read_jsonl(root / trials[0]["run_id"] / "metrics.jsonl") if m["kind"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == 4

    shown = cli_here("sweep", "show", sweep_id, "--plot", "--runs-root", str(root))
    assert shown.returncode == 0, shown.stderr
    assert f"winner: trial {report['winner']['trial']} (run {best})" in shown.stdout
    png = Path(shown.stdout.split("plot: ")[1].strip())
    assert png == root / "sweeps" / sweep_id / "sweep.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000  # curves and points drawn, not an empty canvas

    listed_runs = json.loads(cli_here("runs", "--json", "--runs-root", str(root)).stdout)
    assert sorted(r["sweep"]["trial"] for r in listed_runs if r["sweep"]["id"] == sweep_id) == [0, 1, 2, 3]
    runs = cli_here("runs", "--runs-root", str(root), env={"COLUMNS": "200"})
    assert runs.stdout.count(sweep_id) == 4 and "sweep" in runs.stdout.splitlines()[0], runs.stdout
    listed = cli_here("sweeps", "--runs-root", str(root))
    assert sweep_id in listed.stdout and "4 COMPLETED" in listed.stdout
    nothing = cli_here("sweep", "resume", sweep_id, "--runs-root", str(root))
    assert nothing.returncode == 2 and "nothing to resume" in nothing.stderr


def test_cancel_of_a_sweep_ends_its_running_trial_and_starts_no_other(tmp_path: Path) -> None:
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 100000, "log_every": 1,
                                                                "eval_at_start": False})))
    root = tmp_path / "runs"
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "sweep", str(recipe), "train.seed=0,1", "--runs-root", str(root)],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sweep_dir = _sweep_dir(root)
        trial0 = _trial_run(sweep_dir, 0)
        wait_for_step(root / trial0 / "metrics.jsonl", 3)
        out = cli_here("cancel", sweep_dir.name, "--runs-root", str(root))
        assert out.returncode == 0 and "cancelled 1 trial(s)" in out.stdout, (out.stdout, out.stderr)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "trial 1 (train.seed=1): not started, the sweep was cancelled" in err
    report = json.loads(cli_here("sweep", "show", sweep_dir.name, "--json", "--runs-root", str(root)).stdout)
    assert [r["state"] for r in report["trials"]] == ["CANCELLED", "NOT STARTED"]
    assert not (root / report["trials"][1]["run_id"]).exists()


def test_a_search_prunes_and_continues_after_its_process_is_killed(tmp_path: Path) -> None:
    import optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage
    from optuna.trial import TrialState

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 40, "log_every": 2, "eval_every": 4,
                                                                "save_every": 4, "eval_at_start": False})))
    root = tmp_path / "runs"
    exe = Path(sys.executable).with_name("clustertune")
    argv = [str(exe), "sweep", str(recipe), "train.lr=interval(1e-5,3e-2,log)", "--search", "optuna", "--trials", "6",
            "--seed", "1", "--runs-root", str(root)]
    proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sweep_dir = _sweep_dir(root)
        # Killed (SIGKILL, no chance to record anything) once two trials are done and a third has
        # written a checkpoint.
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it could be killed"
            trials = json.loads((sweep_dir / "sweep.json").read_text())["trials"]
            done = [t for t in trials if t.get("pruned") or t.get("value") is not None]
            running = [t for t in trials if t not in done and t.get("run_id")]
            if len(done) >= 2 and running and list((root / running[-1]["run_id"] / "checkpoints").glob("step-*/state.json")):
                break
            time.sleep(0.05)
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = {t["index"]: t for t in json.loads((sweep_dir / "sweep.json").read_text())["trials"]}
    finished_before = {i for i, t in before.items() if t.get("pruned") or t.get("value") is not None}
    cut = [i for i, t in before.items() if i not in finished_before and t.get("run_id")
           and list((root / t["run_id"] / "checkpoints").glob("step-*"))]

    again = cli_here("sweep", "resume", sweep_dir.name, "--runs-root", str(root))
    assert again.returncode == 0, again.stderr[-3000:]
    report = json.loads(cli_here("sweep", "show", sweep_dir.name, "--json", "--runs-root", str(root)).stdout)
    trials = report["trials"]
    assert len(trials) == 6 and {r["state"] for r in trials} <= {"COMPLETED", "PRUNED"}
    pruned = [r for r in trials if r["state"] == "PRUNED"]
    assert pruned and all(r["steps"] < 40 for r in pruned), trials
    # Not a failure: the run stopped with a checkpoint, at its pruner's request.
    for r in pruned:
        info = json.loads((root / r["run_id"] / "run.json").read_text())
        assert info["state"] == "PREEMPTED" and "the sweep's pruner" in info["reason"], info["reason"]
    assert report["winner"]["trial"] not in {r["trial"] for r in pruned}

    # No finished trial ran again: the same run, one attempt; the study holds each of them once.
    for i in finished_before:
        assert trials[i]["run_id"] == before[i]["run_id"]
        assert len(json.loads((root / before[i]["run_id"] / "run.json").read_text())["attempts"]) == 1
    study = optuna.load_study(study_name=sweep_dir.name,
                              storage=JournalStorage(JournalFileBackend(str(sweep_dir / "study.journal"))))
    told = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(told) == 6 and len({t.params["train.lr"] for t in told}) == 6
    assert sorted(t.state.name for t in told) == sorted("PRUNED" if r["state"] == "PRUNED" else "COMPLETE" for r in trials)
    # The trial that was training when the process died went on from its checkpoint.
    assert cut
    for i in cut:
        attempts = json.loads((root / trials[i]["run_id"] / "run.json").read_text())["attempts"]
        assert len(attempts) == 2 and attempts[1]["resumed_from"], attempts
