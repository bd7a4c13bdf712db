"""The preflight's line in the log says what the checks on the first batches found, and nothing
when none of them applied to the recipe."""

from __future__ import annotations

import logging

import pytest
import torch

from clustertune.recipe.load import load_recipe
from clustertune.train.first_batches import Report, run_checks
from tests.helpers import TINY_CAUSAL


def test_the_line_counts_what_ran() -> None:
    assert Report().line() is None
    assert Report(passed=["a"]).line() == "preflight: 1 check passed"
    assert Report(passed=["a", "b"], warnings=["c: x"]).line() == "preflight: 2 checks passed, 1 warning"
    assert Report(warnings=["c: x", "d: y"]).line() == "preflight: 2 warnings"


def test_no_line_when_no_check_applies(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging.getLogger("clustertune"), "propagate", True)
    # A pretrained causal LM on streamed data (no batches to look at), no adapter, no chats.
    recipe = load_recipe(TINY_CAUSAL)
    with caplog.at_level(logging.INFO, logger="clustertune"):
        report = run_checks(recipe, torch.nn.Linear(2, 2), object(), None, processes=1, device=torch.device("cpu"),
                            forward=None, fresh_model=False)
    assert report.record() == {"passed": [], "warnings": [], "failed": []}
    assert not [m for m in caplog.messages if m.startswith("preflight")], caplog.messages
