"""The suite's background runner (tests/background.py): jobs run in order on spare time only (in
an idle cpu cgroup, which holds what they start in new sessions too), a job reads the one before
it, a failure reaches the test that reads it, and a job no runner was asked for is built by the
test itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests import background

ROOT = Path(__file__).resolve().parents[2]


def first(where: Path, need: Any) -> dict[str, Any]:
    time.sleep(0.5)  # a test asking meanwhile waits for it
    # In a session of its own, as a launcher starts its ranks: still in the idle cgroup.
    cgroup = subprocess.run(["cat", "/proc/self/cgroup"], capture_output=True, text=True, start_new_session=True).stdout
    return {"sched_idle": os.sched_getscheduler(0) == os.SCHED_IDLE, "threads": os.environ.get("OMP_NUM_THREADS"),
            "folder": str(where), "idle_cgroup": f"clustertune-tests-{where.parent.name}" in cgroup}


def second(where: Path, need: Any) -> dict[str, Any]:
    folder, out = need("first")
    return {"read": out["folder"] == str(folder)}


def broken(where: Path, need: Any) -> dict[str, Any]:
    raise ValueError("the job's own words")


JOBS = {"first": ("f1", "tests.unit.test_suite_background:first", ()),
        "second": ("f2", "tests.unit.test_suite_background:second", ("first",)),
        "broken": ("f3", "tests.unit.test_suite_background:broken", ())}


def test_the_runner_runs_each_job_on_spare_time_in_order_and_reports_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    (tmp_path / "planned.json").write_text(json.dumps(["first", "second", "broken"]))
    code = ("import sys, tests.background as b, tests.unit.test_suite_background as t; b.JOBS = t.JOBS; "
            "b.main(sys.argv[1:])")
    runner = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), "first", "second", "broken"], cwd=ROOT)
    monkeypatch.setenv(background.ENV, str(tmp_path))
    monkeypatch.setattr(background, "JOBS", JOBS)
    got: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: got.update(second=background.result("second", tmp_path_factory)))
    reader.start()  # before the job is done: it waits
    folder, out = background.result("first", tmp_path_factory)
    assert out == {"sched_idle": True, "threads": "1", "folder": str(tmp_path / "first"), "idle_cgroup": True}
    assert folder == tmp_path / "first"
    reader.join(30)
    assert got["second"] == (tmp_path / "second", {"read": True})
    with pytest.raises(RuntimeError, match="the job's own words"):
        background.result("broken", tmp_path_factory)
    assert runner.wait(30) == 0 and (tmp_path / "runner.exit").is_file()
    assert not background._cgroup(tmp_path).exists()  # removed once the runner is done


def test_a_job_no_runner_was_asked_for_is_built_by_the_test_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    (tmp_path / "planned.json").write_text(json.dumps([]))
    monkeypatch.setenv(background.ENV, str(tmp_path))
    monkeypatch.setattr(background, "JOBS", JOBS)
    folder, out = background.result("second", tmp_path_factory)
    assert out == {"read": True} and folder.name == "once-second"
    assert not (tmp_path / "second.json").exists()  # built here, not by a runner
    again = background.result("second", tmp_path_factory)
    assert again == (folder, out)


def test_the_jobs_the_suite_defines_name_fixtures_and_builders_that_exist() -> None:
    import importlib

    assert background.jobs_for({"sft_chats_run"}) == ["quickstart", "sft-chats"]
    assert background.jobs_for({"one_process_smoke_runs", "quickstart_cli_run"}) == ["quickstart", "smokes"]
    assert background.jobs_for({"tmp_path"}) == []
    for name, (_, target, deps) in background.JOBS.items():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), name
        assert all(list(background.JOBS).index(d) < list(background.JOBS).index(name) for d in deps), name
