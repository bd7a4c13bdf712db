"""The spelling of a run reference (``run:<run>``, ``run:<run>@step-N``) is read in one module,
clustertune.recipe.run_refs, and turned into a run in one function (models.run_models)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clustertune.recipe.run_refs import is_run_ref, names_checkpoint, run_part, run_ref

SRC = Path(__file__).resolve().parents[3] / "src" / "clustertune"


@pytest.mark.parametrize(("value", "is_ref", "part", "checkpoint"), [
    ("run:quickstart", True, "quickstart", False),
    ("run:quickstart-20260101-120000-ab12@step-50", True, "quickstart-20260101-120000-ab12@step-50", True),
    ("run:", True, "", False),  # a reference with nothing after it: the schema names it
    ("gpt2", False, "", False),
    ("./runs/quickstart/model", False, "", False),
    ("org/model@main", False, "", False),  # a hub name with an @ is no checkpoint of a run
    ("", False, "", False),
    (None, False, "", False),
])
def test_what_a_recipe_value_is(value: str | None, is_ref: bool, part: str, checkpoint: bool) -> None:
    assert (is_run_ref(value), run_part(value), names_checkpoint(value)) == (is_ref, part, checkpoint)


def test_a_reference_round_trips() -> None:
    assert run_part(run_ref("last@step-10")) == "last@step-10"


def test_no_other_module_reads_the_prefix_itself() -> None:
    """Checking ``startswith`` or cutting the prefix off by hand elsewhere is how the four
    readers of old came to differ (a checkpoint reference taken for a hub name in one of them)."""
    by_hand = re.compile(r"startswith\([^)]*(RUN_PREFIX|\"run:\")|len\(RUN_PREFIX\)|RUN_PREFIX\s*\+")
    found = [f"{p.relative_to(SRC)}:{n}" for p in sorted(SRC.rglob("*.py")) if p.name != "run_refs.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if by_hand.search(line)]
    assert found == [], found
