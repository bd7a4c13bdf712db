"""Scripting the CLI: --json output, the `last` run, `runs rm`, and tables that never cut an id."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustertune.cli.main import main
from clustertune.cli.tables import fitting_columns
from clustertune.recipe.load import dump_recipe, load_recipe
from clustertune.runs import Run, RunState, get_run
from clustertune.runs.records import DataRef
from tests.helpers import TINY_CAUSAL, cli


@pytest.fixture
def trained(tmp_path: Path, tiny_policy_run: Any) -> Run:
    """A copy of the session's tiny trained run (30 steps) under a runs root of this test's own."""
    root = tmp_path / "runs"
    shutil.copytree(tiny_policy_run.paths.root, root / tiny_policy_run.id)
    return get_run(tiny_policy_run.id, root)


@pytest.fixture
def run_json(capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    """The CLI in this process; its output parsed as JSON."""
    def call(*args: str) -> Any:
        rc = main(list(args))
        out = capsys.readouterr()
        assert rc == 0, out.err
        return json.loads(out.out)
    return call


def _newer_failed_run(root: Path) -> Run:
    recipe = dump_recipe(load_recipe({**TINY_CAUSAL, "name": "later"}))
    r = Run.create(root, "later", "causal_lm", recipe, ["clustertune", "run", "later"])
    r.start_attempt()
    r.transition(RunState.FAILED, reason="stopped on purpose")
    return r


def test_runs_show_and_status_as_json_and_the_last_run(trained: Run, run_json: Callable[..., Any],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root = str(trained.paths.root.parent)
    done = cli("runs", "--json", "--runs-root", root)  # the installed entry point, end to end
    assert done.returncode == 0, done.stderr
    [listed] = json.loads(done.stdout)
    assert listed["id"] == trained.id and listed["state"] == "COMPLETED" and listed["steps"] == 30
    assert listed["best_eval"]["metric"] == "perplexity" and listed["best_eval"]["value"] > 1
    assert listed["dir"] == str(trained.paths.root) and listed["task"] == "causal_lm"

    shown = run_json("runs", "show", "last", "--json", "--runs-root", root)
    assert {k: shown[k] for k in listed} == listed
    assert [a["state"] for a in shown["attempts"]] == ["COMPLETED"]
    assert shown["last_train"]["step"] == 30 and shown["evals"][-1]["step"] == 30
    assert Path(shown["model"]).is_dir() and Path(shown["metrics"]).is_file()

    assert run_json("status", "last", "--json", "--runs-root", root) == {"id": trained.id, "state": "COMPLETED",
                                                                       "reason": None}
    assert main(["logs", "last", "--runs-root", root]) == 0
    assert f"run {trained.id}: " in capsys.readouterr().out
    assert main(["cancel", "last", "--runs-root", root]) == 2
    assert f"run {trained.id} is already COMPLETED" in capsys.readouterr().err
    later = _newer_failed_run(trained.paths.root.parent)
    assert run_json("status", "last", "--json", "--runs-root", root) == {"id": later.id, "state": "FAILED",
                                                                       "reason": "stopped on purpose"}
    assert main(["run", "--resume", "last", "--dry-run", "--runs-root", root]) == 0  # `last` is the new run now
    shown_plan = capsys.readouterr().out  # the plan of that run, in its own directory, decided as a resume is
    assert f'"run_id": "{later.id}"' in shown_plan and f'"run_dir": "{later.paths.root}"' in shown_plan
    assert main(["run", "--resume", trained.id, "--dry-run", "--runs-root", root]) == 2  # nothing to resume
    assert f"run {trained.id} already COMPLETED; start a new run" in capsys.readouterr().err
    assert [r["id"] for r in run_json("runs", "--json", "--runs-root", root)] == [trained.id, later.id]


def test_last_with_no_runs_and_an_empty_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "none")
    assert main(["status", "last", "--runs-root", root]) == 2
    assert "no runs under" in capsys.readouterr().err
    assert main(["runs", "--json", "--runs-root", root]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_runs_rm_removes_ended_runs_and_refuses_running_ones(trained: Run, capsys: pytest.CaptureFixture[str]) -> None:
    root = trained.paths.root.parent
    later = _newer_failed_run(root)
    live = Run.create(root, "live", "causal_lm", "name: live\n", ["clustertune", "run", "live"])
    live.start_attempt()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        live.attempts[-1].pid = sleeper.pid  # the run's process: alive until it is cancelled
        live.save()
        rc = main(["runs", "rm", later.id, "live", "--runs-root", str(root)])
        err = capsys.readouterr().err
        assert rc == 2 and f"{live.id} (RUNNING) not ended" in err and "--force" in err and "Traceback" not in err
        assert later.paths.root.is_dir() and live.paths.root.is_dir()  # nothing removed when one is refused

        assert main(["runs", "rm", "nothing-like-it", "--runs-root", str(root)]) == 2
        assert "no run 'nothing-like-it'" in capsys.readouterr().err

        done = cli("runs", "rm", "live", "--force", "--runs-root", str(root))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"removed {live.id} ({live.paths.root})"
        assert sleeper.wait(timeout=30) == -signal.SIGINT  # cancelled before its directory went
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not live.paths.root.exists()
    assert main(["runs", "rm", "last", trained.id, "--runs-root", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"removed {later.id} ({later.paths.root})",
                                                     f"removed {trained.id} ({trained.paths.root})"]
    assert list(root.iterdir()) == []


def test_tables_keep_ids_and_fingerprints_whole_in_a_narrow_terminal(
        trained: Run, run_json: Callable[..., Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(trained.paths.root.parent)
    done = cli("runs", "--runs-root", root, env={"COLUMNS": "34"})
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert row.split() == [trained.id, "COMPLETED"] and header.split() == ["id", "state"]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["runs", "--runs-root", root]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert wide[0].split() == ["id", "task", "state", "steps", "best", "eval", "age"]

    fingerprint = DataRef.model_validate_json(trained.paths.data.read_text()).fingerprint
    entries = run_json("cache", "ls", "--json")
    assert fingerprint in {e["fingerprint"] for e in entries}
    entry = next(e for e in entries if e["fingerprint"] == fingerprint)
    assert entry["splits"]["train"]["samples"] > 0 and Path(entry["dir"]).is_dir() and entry["bytes"] > 0
    width = len(fingerprint) + 16
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["cache", "ls"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(line.split()[0] == fingerprint for line in listed)
    assert all(len(line.rstrip()) <= width for line in listed[:-1])


def test_fitting_columns_drops_whole_columns_in_order() -> None:
    headers, rows = ["id", "a", "b"], [["x" * 20, "y" * 10, "z" * 10]]
    assert fitting_columns(headers, rows, 80, ["b", "a"]) == [0, 1, 2]
    assert fitting_columns(headers, rows, 40, ["b", "a"]) == [0, 1]
    assert fitting_columns(headers, rows, 10, ["b", "a", "id"]) == [0]


def test_estimate_memory_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(TINY_CAUSAL))
    assert main(["estimate-memory", str(recipe), "--gpu", "H100", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["recipe"] == "tiny" and est["devices"] == 1 and est["gpu"]["name"] == "H100"
    ddp = est["strategies"][0]
    assert ddp["strategy"] == "ddp" and ddp["params"] == 4 * est["parameters"]  # fp32 weights
    for s in est["strategies"]:
        assert s["per_device"] == sum(s[k] for k in ("params", "grads", "optimizer", "activations", "buffers"))
        assert s["fits"] is True
    assert main(["estimate-memory", str(recipe), "--gpu", "H100"]) == 0
    table = capsys.readouterr().out
    names = [s["strategy"] for s in est["strategies"]]
    assert [line.split()[0] for line in table.splitlines()[2:2 + len(names)]] == names
