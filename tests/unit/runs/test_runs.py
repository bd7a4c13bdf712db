"""Run directories, states, attempts and lookup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustertune.errors import RunError
from clustertune.runs import Run, RunState, get_run, list_runs, report
from clustertune.runs.state import IllegalTransition


def make(root: Path, name: str = "r") -> Run:
    return Run.create(root, name, "causal_lm", "name: r\n", ["clustertune", "run", "r"])


def test_create_writes_run_json_and_recipe(tmp_path: Path) -> None:
    r = make(tmp_path)
    assert r.state is RunState.CREATED and r.paths.recipe.read_text() == "name: r\n"
    assert r.info.versions["torch"] and r.info.command[:2] == ["clustertune", "run"]
    assert r.paths.logs_dir.is_dir()
    assert Run.load(r.paths.root).info == r.info


def test_state_machine_edges(tmp_path: Path) -> None:
    r = make(tmp_path)
    r.start_attempt()
    assert r.state is RunState.RUNNING and r.attempts[0].pid == os.getpid()
    r.transition(RunState.FAILED, reason="boom")
    assert r.attempts[0].state == "FAILED" and r.attempts[0].reason == "boom"
    r.start_attempt(resumed_from="step-00000010")  # FAILED -> RUNNING is the resume edge
    r.transition(RunState.COMPLETED)
    assert [a.state for a in Run.load(r.paths.root).attempts] == ["FAILED", "COMPLETED"]
    with pytest.raises(IllegalTransition, match="is COMPLETED; it cannot become RUNNING"):
        r.transition(RunState.RUNNING)


def test_dead_process_is_reconciled_to_failed(tmp_path: Path) -> None:
    r = make(tmp_path)
    r.start_attempt()
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    r.attempts[-1].pid = p.pid  # an attempt whose process has exited
    r.save()
    again = get_run(r.id, tmp_path)
    assert again.state is RunState.FAILED and "without reporting" in again.info.reason


def test_lookup_by_prefix_and_errors(tmp_path: Path) -> None:
    a, b = make(tmp_path, "alpha"), make(tmp_path, "beta")
    assert get_run("alpha", tmp_path).id == a.id
    assert [r.id for r in list_runs(tmp_path)] == [a.id, b.id]
    make(tmp_path, "alpha")
    with pytest.raises(RunError, match="ambiguous"):
        get_run("alpha", tmp_path)
    with pytest.raises(RunError, match=r"no run 'gamma' under .*`clustertune runs` lists"):
        get_run("gamma", tmp_path)
    with pytest.raises(RunError, match="not a run id"):
        get_run("../etc", tmp_path)


GOLDEN = Path(__file__).resolve().parents[2] / "golden"


@pytest.mark.parametrize("name", ["run_json_slurm_requeued.json", "run_json_ssh_failed.json"])
def test_run_json_written_by_the_previous_version_loads_and_round_trips(tmp_path: Path, name: str) -> None:
    """run.json as clustertune wrote it before the records were typed: loads, reports, and
    saving it again keeps every key (unknown ones included) with the same values."""
    raw = json.loads((GOLDEN / name).read_text())
    raw["written_by_a_newer_version"] = {"kept": True}
    root = tmp_path / raw["id"]
    (root / "logs").mkdir(parents=True)
    (root / "run.json").write_text(json.dumps(raw))
    run = get_run(raw["id"], tmp_path)
    assert run.state is RunState(raw["state"]) and run.info.backend == raw["backend"]
    assert [a.state.value for a in run.attempts] == [a["state"] for a in raw["attempts"]]
    assert run.attempts[-1].job_id == raw["attempts"][-1]["job_id"]
    assert "attempt 1" in report.show_text(run)
    run.save()
    assert json.loads((root / "run.json").read_text()) == raw
    if run.info.remote is not None:
        run.update_remote(gathered=False)
        assert Run.load(root).info.remote == {**raw["remote"], "gathered": False}


def test_a_damaged_run_json_is_a_typed_error(tmp_path: Path) -> None:
    r = make(tmp_path)
    r.paths.run_json.write_text('{"id": "x", "state": "SLEEPING"}')
    with pytest.raises(RunError, match="run.json is not a run record"):
        get_run(r.id, tmp_path)
    assert list_runs(tmp_path) == []


def test_requeue_reopens_an_attempt_and_the_node_side_starts_it(tmp_path: Path) -> None:
    r = make(tmp_path)
    r.start_attempt(job_id="77", state=RunState.PENDING)
    r.node_started("77", None)
    assert r.state is RunState.RUNNING and r.attempts[-1].state is RunState.RUNNING
    r.transition(RunState.PREEMPTED, reason="stop request (SIGUSR2) at step 4")
    r.node_started("77", "step-00000004")  # a requeued job: a new attempt, resumed
    loaded = Run.load(r.paths.root)
    assert [(a.state.value, a.resumed_from) for a in loaded.attempts] == [("PREEMPTED", None),
                                                                        ("RUNNING", "step-00000004")]
    assert loaded.info.reason is None and loaded.attempts[0].reason.startswith("stop request")


def test_follow_and_wait_read_a_growing_log_until_the_run_ends(tmp_path: Path) -> None:
    import threading

    from clustertune.launch.backends import job_for
    from clustertune.launch.base import follow, wait

    r = make(tmp_path)
    r.start_attempt()  # this process is the attempt's pid: alive, so it is not reconciled away
    job = job_for(r)

    def write_then_finish() -> None:
        with r.paths.log.open("a") as fh:
            for i in range(3):
                fh.write(f"step {i}\n")
                fh.flush()
                time.sleep(0.1)
            fh.write("done without a newline")
        Run.load(r.paths.root).transition(RunState.COMPLETED)

    t = threading.Thread(target=write_then_finish)
    t.start()
    lines = list(follow(job, poll=0.05))
    t.join()
    assert lines == ["step 0", "step 1", "step 2", "done without a newline"]
    assert wait(job, timeout=5, poll=0.05) is RunState.COMPLETED
    assert job.logs() == "step 0\nstep 1\nstep 2\ndone without a newline"
    with pytest.raises(RunError, match="has no node 1"):
        job.logs(1)


def test_data_json_of_the_previous_version_loads_and_round_trips() -> None:
    from clustertune.runs.records import DataRef

    old = {"fingerprint": "5f0c3a9e1d2b4c6a8e7f", "dir": "/cache/5f0c3a9e1d2b4c6a8e7f",
           "manifest": "/cache/5f0c3a9e1d2b4c6a8e7f/manifest.json", "manifest_sha256": "ab" * 32,
           "total_bytes": 123456, "task": "causal_lm",
           "splits": {"train": {"examples": 100, "tokens": 6400}, "validation": {"examples": 8, "tokens": 512}}}
    ref = DataRef.model_validate_json(json.dumps(old))
    assert ref.fingerprint == old["fingerprint"] and ref.splits["train"]["tokens"] == 6400
    assert ref.to_json() == old


@pytest.mark.parametrize(("task", "use"), [("sft", "chat {id}"), ("causal_lm", 'generate {id} "The prompt"'),
                                           ("sequence_classification", None)])
def test_the_end_of_a_run_says_how_to_use_what_it_trained(tmp_path: Path, task: str, use: str | None) -> None:
    from clustertune.runs.report import final_lines

    run = Run.create(tmp_path, "r", task, None, ["clustertune", "run"])
    lines = final_lines(run)
    assert lines[0] == f"  next:    clustertune runs show {run.id} --plot"
    assert lines[1:] == ([f"           clustertune {use.format(id=run.id)}"] if use else [])
