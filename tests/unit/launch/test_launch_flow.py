"""One launch flow for every backend: decide, the backend's check (nothing written yet), the run
directory, the data where this machine prepares it, the backend's submit. In-process training is
a registry backend like the others."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clustertune.errors import DataError, LaunchError, UserError
from clustertune.launch import backends as base
from clustertune.launch.base import Resuming
from clustertune.launch.inprocess import IN_PROCESS_LINE, InProcessLauncher
from clustertune.launch.local import LocalJob
from clustertune.launch.plan import LaunchPlan
from clustertune import api
from clustertune.launch.decision import backend_for
from clustertune.recipe.load import load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run
from tests.helpers import TINY_CAUSAL, with_


def _recipe(runs: Path, **launch_keys: Any) -> Recipe:
    return load_recipe(with_(TINY_CAUSAL, tracking={"runs_root": str(runs)}, launch=launch_keys))


def _run_dirs(runs: Path) -> list[str]:
    return sorted(p.name for p in runs.iterdir() if (p / "run.json").is_file()) if runs.is_dir() else []


@dataclass
class Probe:
    """A backend that records what the flow hands it, in order, and 'runs' by completing the run."""

    runs: Path
    calls: list[tuple[str, Any]] = field(default_factory=list)
    name: str = "local"
    prepares_data_here: bool = True
    fail_check: bool = False
    cannot_ask: bool = False  # job(): the scheduler's commands are missing here

    def check(self, recipe: Recipe, plan: LaunchPlan, resuming: Resuming | None = None) -> None:
        self.calls.append(("check", {"run_dirs": _run_dirs(self.runs), "resuming": resuming, "plan_run_id": plan.run_id}))
        if self.fail_check:
            raise UserError("probe: refused")

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        return ["# probe"]

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Any = None,
               show_progress: bool = True, wait: bool = True) -> LocalJob:
        self.calls.append(("submit", {"run_id": run.id, "plan_run_id": plan.run_id, "data": run.paths.data.is_file(),
                                      "tokenizer": run.paths.has_tokenizer, "show_progress": show_progress}))
        run.start_attempt()
        run.transition(RunState.FAILED, reason="probe stopped it")  # resumable, for the second launch
        return LocalJob(run)

    def job(self, run: Run) -> LocalJob:
        if self.cannot_ask:
            raise LaunchError("probe: `squeue` is not on PATH")
        return LocalJob(run)


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Probe:
    p = Probe(tmp_path / "runs")
    monkeypatch.setitem(base._EXTRA, "local", lambda: p)  # a registered backend wins over the built-in one
    return p


def test_every_backend_is_checked_before_its_run_exists_then_submitted_with_the_data(probe: Probe) -> None:
    recipe = _recipe(probe.runs, procs_per_node=2)  # a launched run: the "local" backend, our probe
    run = api.run(recipe, show_progress=False)
    (check, seen), (submit, sub) = probe.calls
    assert (check, submit) == ("check", "submit")
    assert seen["run_dirs"] == [] and seen["resuming"] is None  # nothing written when it was checked
    assert sub["run_id"] == run.id == sub["plan_run_id"]
    assert sub["data"] and sub["tokenizer"]  # prepared here, before the ranks would start
    assert sub["show_progress"] is False
    assert json.loads(run.paths.run_json.read_text())["backend"] == "local"


def test_a_refused_check_leaves_no_run_directory(probe: Probe) -> None:
    probe.fail_check = True
    with pytest.raises(UserError, match="probe: refused"):
        api.run(_recipe(probe.runs, procs_per_node=2))
    assert _run_dirs(probe.runs) == []


def test_a_resume_goes_through_the_same_check_with_the_run_and_its_launch_overrides(probe: Probe) -> None:
    first = api.run(_recipe(probe.runs, procs_per_node=2))
    probe.calls.clear()
    again = api.run(None, resume=first.id, runs_root_dir=probe.runs, overrides=["launch.procs_per_node=1"])
    (_, seen), (_, sub) = probe.calls
    resuming = seen["resuming"]
    assert isinstance(resuming, Resuming) and resuming.run.id == first.id and seen["plan_run_id"] == first.id
    assert sub["run_id"] == again.id == first.id
    # Launched once, it stays with the launcher at one process; the override is recorded.
    assert load_recipe(again.paths.recipe).launch.procs_per_node == 1
    assert len(get_run(first.id, probe.runs).attempts) == 2


def test_a_resume_goes_on_with_the_recorded_state_where_the_backend_cannot_be_asked(
        probe: Probe, caplog: pytest.LogCaptureFixture) -> None:
    first = api.run(_recipe(probe.runs, procs_per_node=2))
    probe.cannot_ask = True
    with caplog.at_level("WARNING", logger="clustertune"):
        again = api.run(None, resume=first.id, runs_root_dir=probe.runs)
    assert again.id == first.id and len(again.attempts) == 2
    assert "could not ask the local backend" in caplog.text and "squeue" in caplog.text


def test_the_flow_refuses_a_resume_of_a_completed_run_before_its_backend_sees_it(probe: Probe) -> None:
    first = api.run(_recipe(probe.runs, procs_per_node=2))
    first.reload().start_attempt()
    first.transition(RunState.COMPLETED)
    probe.calls.clear()
    with pytest.raises(UserError, match="already COMPLETED"):
        api.run(None, resume=first.id, runs_root_dir=probe.runs)
    assert probe.calls == []


def test_the_backend_of_a_recipe(tmp_path: Path) -> None:
    cpu = {"device": "cpu"}
    assert backend_for(load_recipe(with_(TINY_CAUSAL, train={**TINY_CAUSAL["train"], **cpu}))) == "inprocess"
    assert backend_for(_recipe(tmp_path, procs_per_node=2)) == "local"
    assert backend_for(_recipe(tmp_path, procs_per_node=1), user_command=["python", "x.py"]) == "local"
    assert isinstance(base.launcher("inprocess"), InProcessLauncher)


def test_in_process_submit_without_check_is_a_bug_not_a_silent_run(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    run = Run.create(tmp_path, "x", "causal_lm", None, ["t"])
    with pytest.raises(RuntimeError, match="before check"):
        InProcessLauncher().submit(None, run, recipe)  # type: ignore[arg-type]


def test_a_bad_dataset_fails_the_in_process_check_and_leaves_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # A file the preflight finds (it reads no data) but that holds no examples: the in-process
    # check, which prepares the data, refuses it before the run directory exists.
    (tmp_path / "empty.txt").write_text("")
    recipe = load_recipe(with_(TINY_CAUSAL, tracking={"runs_root": str(runs)},
                               data={"dataset": None, "train_files": [str(tmp_path / "empty.txt")], "block_size": 64}))
    with pytest.raises(DataError, match="empty.txt"):
        api.run(recipe, show_progress=False)
    assert _run_dirs(runs) == []


def test_the_in_process_backend_stays_light_until_it_trains() -> None:
    """Looking it up and describing a plan (a dry run) import no torch."""
    code = ("import sys; from clustertune.launch import backends as base, submit; from clustertune.recipe.load import load_recipe; "
            "b = base.launcher('inprocess'); "
            "print(submit.describe_launch(submit.decide_recipe(load_recipe('quickstart'), runs_root_dir='/tmp/unused', "
            "dry=True)).splitlines()[-1]); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == IN_PROCESS_LINE
    assert out[1] == "False"


def test_in_process_data_is_prepared_once_whatever_prepare_data_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process check prepares the data; launch.prepare_data=submitter must not make the
    flow prepare (fingerprint, hash the sources) a second time."""
    from clustertune.data import run_data

    calls: list[str] = []
    real = run_data.prepare

    def counted(recipe: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(recipe.task)
        return real(recipe, *args, **kwargs)

    monkeypatch.setattr(run_data, "prepare", counted)  # every run's data step prepares through it
    runs = tmp_path / "runs"
    recipe = load_recipe(with_(TINY_CAUSAL, tracking={"runs_root": str(runs)}, launch={"prepare_data": "submitter"},
                               train={**TINY_CAUSAL["train"], "max_steps": 2, "eval_at_start": False}))
    run = api.run(recipe, show_progress=False)
    assert run.state is RunState.COMPLETED and run.paths.data.is_file()
    assert calls == ["causal_lm"], calls
