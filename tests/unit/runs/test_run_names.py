"""One grammar for naming a run everywhere: an id, a unique prefix, `last`, or the run's name
(its recipe's), which several runs answer to: the newest for what reads a run, the newest with a
final model for what loads one, an error listing them for what changes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustertune.errors import RunError
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run
from tests.helpers import cli


def run_of(root: Path, name: str, state: RunState, model: bool = False) -> Run:
    r = Run.create(root, name, "causal_lm", f"name: {name}\n", ["clustertune", "run", name])
    r.start_attempt()
    if state.terminal:
        r.transition(state)
    if model:
        r.paths.model.mkdir()
        (r.paths.model / "config.json").write_text("{}")
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("runs")
    return {"old": run_of(root, "quickstart", RunState.COMPLETED, model=True),
            "done": run_of(root, "quickstart", RunState.COMPLETED, model=True),
            "failed": run_of(root, "quickstart", RunState.FAILED),
            "other": run_of(root, "quick-sft", RunState.COMPLETED, model=True),
            "root": root}  # type: ignore[dict-item]


def test_a_name_several_runs_answer_to_is_taken_by_purpose(runs: dict) -> None:
    root = runs["root"]
    assert get_run("quickstart", root, by_name="newest").id == runs["failed"].id
    assert get_run("quickstart", root, by_name="newest_model").id == runs["done"].id
    with pytest.raises(RunError, match="run id 'quickstart' is ambiguous .* 3 runs .*give the whole id"):
        get_run("quickstart", root)
    assert get_run(runs["old"].id, root, by_name="newest_model").id == runs["old"].id  # an id is that run
    assert get_run("quick-", root, by_name="newest").id == runs["other"].id  # a unique prefix


def test_a_prefix_that_spans_several_names_stays_ambiguous(runs: dict) -> None:
    with pytest.raises(RunError, match="run id 'quick' is ambiguous .* 4 runs") as err:
        get_run("quick", runs["root"], by_name="newest_model")
    assert "give the whole id" not in str(err.value)


def test_a_name_without_a_finished_model_says_so(tmp_path: Path) -> None:
    run_of(tmp_path, "sft", RunState.FAILED)
    run_of(tmp_path, "sft", RunState.CANCELLED)
    with pytest.raises(RunError, match="no run of 'sft' has a final model yet .*CANCELLED"):
        get_run("sft", tmp_path, by_name="newest_model")


def test_the_commands_read_a_name_the_same_way(runs: dict) -> None:
    root = str(runs["root"])
    status = cli("status", "quickstart", "--runs-root", root)
    assert status.returncode == 0 and runs["failed"].id in status.stdout, status.stderr
    for changing in (["cancel", "quickstart"], ["runs", "rm", "quickstart"]):
        out = cli(*changing, "--runs-root", root)
        assert out.returncode == 2 and "is ambiguous" in out.stderr and "Traceback" not in out.stderr
    assert all(r.paths.root.is_dir() for key, r in runs.items() if key != "root")
