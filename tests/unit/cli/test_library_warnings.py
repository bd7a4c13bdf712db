"""What PEFT, transformers and torch warn while an adapter recipe is checked or run never reaches
the terminal: a run writes it into its ``logs/run.log``; ``validate`` (no run) drops it, and
shows it with ``--debug``; a run refused before it starts shows only the error."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.adapter_fixtures import lora_recipe
from tests.helpers import cli_here


def _as_at_a_terminal(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                      line: str | None = None) -> None:
    """Python's own printing of a warning (pytest records them instead)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@pytest.fixture
def every_warning_printed() -> Iterator[None]:
    """Each warning printed every time, as in a fresh process that meets it for the first time."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _as_at_a_terminal
        yield


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data cache of the test's own: the model checks that make the libraries warn run here, not
    remembered from another test's check of the same model (models/meta_check.py)."""
    monkeypatch.setenv("CLUSTERTUNE_CACHE", str(tmp_path / "cache"))


def _library_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "Warning" in ln or "warnings.warn" in ln]


@pytest.fixture(params=["lora", "qlora", "dora"])
def adapter_recipe(request: pytest.FixtureRequest, llama_base: Path, tmp_path: Path) -> Path:
    recipe = lora_recipe(llama_base, type=request.param)
    recipe["train"].update(device="cpu", max_steps=2)
    path = tmp_path / f"{request.param}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_validate_of_an_adapter_recipe_prints_no_library_warning(
        adapter_recipe: Path, runs_root: Path, every_warning_printed: None, tmp_path: Path) -> None:
    if "qlora" in adapter_recipe.name:
        pytest.importorskip("bitsandbytes")
    checked = cli_here("validate", str(adapter_recipe))
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked
    assert checked.stderr == "", checked.stderr
    ours = logging.getLogger("clustertune")
    level = ours.level
    try:
        # In another empty cache: the first check is remembered, and a second one builds nothing.
        debugged = cli_here("validate", str(adapter_recipe), "--debug", env={"CLUSTERTUNE_CACHE": str(tmp_path / "c2")})
    finally:
        ours.setLevel(level)  # --debug sets it for the process; the next test's CLI call is not debugged
    assert debugged.returncode == 0
    # --debug keeps them: PEFT's call into transformers' deprecated gradient checkpointing check
    assert "FutureWarning" in debugged.stderr and "py.warnings" in debugged.stderr, debugged.stderr


def test_a_warning_during_a_run_lands_in_its_log_not_on_the_terminal(
        llama_base: Path, runs_root: Path, tmp_path: Path, every_warning_printed: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.runs.store import get_run
    from clustertune.train import execute

    loop = execute.train_loop

    def loop_and_warn(*args: Any, **kwargs: Any) -> Any:  # as a library warns from inside the training loop
        warnings.warn("a library's notice while training", UserWarning, stacklevel=1)
        return loop(*args, **kwargs)

    monkeypatch.setattr(execute, "train_loop", loop_and_warn)
    recipe = lora_recipe(llama_base)
    recipe["train"].update(device="cpu", max_steps=2)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    ran = cli_here("run", str(tmp_path / "r.yaml"), "--no-progress")
    assert ran.returncode == 0, ran.stderr
    assert _library_lines(ran.stderr) == [], ran.stderr
    log = get_run("last", runs_root).paths.log.read_text()
    assert "[py.warnings]" in log and "UserWarning: a library's notice while training" in log, log
    assert "FutureWarning" in log  # the preflight's own, held until the run's log existed


def test_a_run_refused_before_it_starts_shows_the_error_alone(
        adapter_recipe: Path, runs_root: Path, every_warning_printed: None) -> None:
    if "qlora" in adapter_recipe.name:
        pytest.importorskip("bitsandbytes")
    refused = cli_here("run", str(adapter_recipe), "data.text_column=body", "--no-progress")
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1].startswith("error: data.text_column: column 'body'"), refused.stderr
    assert _library_lines(refused.stderr) == [], refused.stderr
    assert not runs_root.exists() or not any(runs_root.iterdir())
