"""Run directories, states, attempts and lookup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clustertune.errors import RunError
from clustertune.runs import Run, RunState, get_run, list_runs
from clustertune.runs.state import IllegalTransition


def make(root: Path, name: str = "r") -> Run:
    return Run.create(root, name, "causal_lm", "name: r\n", ["clustertune", "run", "r"])


def test_create_writes_run_json_and_recipe(tmp_path: Path) -> None:
    r = make(tmp_path)
    assert r.state is RunState.CREATED and r.paths.recipe.read_text() == "name: r\n"
    assert r.info["versions"]["torch"] and r.info["command"][:2] == ["clustertune", "run"]
    assert r.paths.logs_dir.is_dir()
    assert Run.load(r.paths.root).info == r.info


def test_state_machine_edges(tmp_path: Path) -> None:
    r = make(tmp_path)
    r.start_attempt()
    assert r.state is RunState.RUNNING and r.attempts[0]["pid"] == os.getpid()
    r.transition(RunState.FAILED, reason="boom")
    assert r.attempts[0]["state"] == "FAILED" and r.attempts[0]["reason"] == "boom"
    r.start_attempt(resumed_from="step-00000010")  # FAILED -> RUNNING is the resume edge
    r.transition(RunState.COMPLETED)
    assert [a["state"] for a in Run.load(r.paths.root).attempts] == ["FAILED", "COMPLETED"]
    with pytest.raises(IllegalTransition, match="is COMPLETED; it cannot become RUNNING"):
        r.transition(RunState.RUNNING)


def test_dead_process_is_reconciled_to_failed(tmp_path: Path) -> None:
    r = make(tmp_path)
    r.start_attempt()
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    r.attempts[-1]["pid"] = p.pid  # an attempt whose process has exited
    r.save()
    again = get_run(r.id, tmp_path)
    assert again.state is RunState.FAILED and "without reporting" in again.info["reason"]


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
