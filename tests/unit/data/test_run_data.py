"""A run's data step (clustertune.data.run_data), the one function the submitting host, the
in-process check and SLURM's job step prepare through: prepared and recorded once, kept by a
later attempt, nothing for a task whose trainer loads its own, and the job step's own lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustertune.data import job_step, run_data
from clustertune.recipe.load import dump_recipe, load_recipe
from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from tests.helpers import TINY_CAUSAL, with_


def _recipe(tmp_path: Path, **data: Any) -> Any:
    return load_recipe(with_(TINY_CAUSAL, data={**TINY_CAUSAL["data"], "cache_dir": str(tmp_path / "cache"), **data}))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = run_data.prepare

    def counted(recipe: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(recipe.task)
        return real(recipe, *args, **kwargs)

    monkeypatch.setattr(run_data, "prepare", counted)
    return calls


def test_prepared_and_recorded_once_then_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    recipe, paths = _recipe(tmp_path), RunPaths(tmp_path / "run")
    paths.root.mkdir()
    assert not run_data.holds_data(paths)
    prepared = run_data.data_step(recipe, paths)
    assert prepared is not None and calls == ["causal_lm"]
    ref = json.loads(paths.data.read_text())
    assert ref["fingerprint"] == prepared.fingerprint and ref["dir"] == str(prepared.dir)
    assert (paths.tokenizer / "tokenizer.json").is_file() and run_data.holds_data(paths)
    # A later attempt (a requeued job, a resume) keeps what the run started with, without preparing.
    before = paths.data.read_bytes()
    assert run_data.data_step(recipe, paths) is None
    assert calls == ["causal_lm"] and paths.data.read_bytes() == before


def test_data_prepared_by_the_callers_check_is_recorded_where_it_is_now(tmp_path: Path) -> None:
    """The in-process check prepares at every attempt; its record names today's cache entry."""
    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir()
    run_data.data_step(_recipe(tmp_path), paths)
    moved = _recipe(tmp_path / "elsewhere")
    again = run_data.prepare_for_run(moved)
    assert again is not None and run_data.data_step(moved, paths, again) is again
    assert json.loads(paths.data.read_text())["dir"] == str(again.dir)
    assert str(tmp_path / "elsewhere" / "cache") in str(again.dir)


def test_a_task_whose_trainer_loads_its_own_data_has_no_data_step(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    recipe = load_recipe("rlhf-grpo-offline")
    assert recipe.traits.data is None
    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir()
    assert run_data.prepare_for_run(recipe) is None and run_data.data_step(recipe, paths) is None
    assert calls == [] and not paths.data.exists() and not paths.tokenizer.exists()


def _job_dir(tmp_path: Path, recipe: Any) -> RunPaths:
    run = Run.create(tmp_path / "runs", "tiny", recipe.task, dump_recipe(recipe), ["clustertune", "run"], backend="slurm")
    return run.paths


def test_the_job_step_prepares_then_a_requeued_job_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _job_dir(tmp_path, _recipe(tmp_path))
    assert job_step.main([str(paths.root)]) == 0
    first = capsys.readouterr().out
    assert first.startswith("data ") and ": prepared in " in first, first
    assert job_step.main([str(paths.root)]) == 0
    assert capsys.readouterr().out == "data: kept from the run's first attempt\n"


def test_bad_data_in_the_job_step_fails_the_run_naming_the_key_to_fix(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "train.jsonl"
    bad.write_text('{"text": "one example, nothing left to hold out"}\n')
    recipe = load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(bad)], "block_size": 64,
                                                  "cache_dir": str(tmp_path / "cache")}))
    paths = _job_dir(tmp_path, recipe)
    assert job_step.main([str(paths.root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("data step failed: ") and "data.validation_files" in err, err
    run = Run.load(paths.root)  # `clustertune status` says why, where the job itself has only an exit code
    assert run.state is RunState.FAILED and "data.validation_files" in (run.info.reason or "")
    assert not paths.data.exists()
