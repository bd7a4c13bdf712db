"""The fault-injection hook's spec: what CLUSTERTUNE_FAULT asks for, and that a typo is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustertune.train import faults


def test_a_spec_names_kind_rank_step_and_phase() -> None:
    got = faults.parse("kill:1:8:backward, segfault:*:3:checkpoint", once="/tmp/x")
    assert [(f.kind, f.rank, f.step, f.phase, f.once) for f in got] == [
        ("kill", 1, 8, "backward", "/tmp/x"), ("segfault", None, 3, "checkpoint", "/tmp/x")]
    assert [f.spec() for f in got] == ["kill:1:8:backward", "segfault:*:3:checkpoint"]
    assert faults.parse("") == []


@pytest.mark.parametrize("bad", ["kill:1:8", "explode:0:1:step", "kill:one:1:step", "hang:0:1:forward", "kill:0:-1:step"])
def test_a_malformed_spec_is_refused_with_the_format(bad: str) -> None:
    with pytest.raises(ValueError, match="CLUSTERTUNE_FAULT=.*KIND:RANK:STEP:PHASE"):
        faults.parse(bad)


def test_unset_means_no_fault_and_points_do_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (faults.FAULT_ENV, faults.KILL_AT_STEP_ENV):
        monkeypatch.delenv(name, raising=False)
    faults.planned.cache_clear()
    try:
        assert faults.planned() is None
        faults.point("backward", 1, 0)  # returns: this process is still here
    finally:
        faults.planned.cache_clear()


def test_the_older_kill_at_step_variable_is_a_kill_after_that_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faults.FAULT_ENV, raising=False)
    monkeypatch.setenv(faults.KILL_AT_STEP_ENV, "6")
    faults.planned.cache_clear()
    try:
        (f,) = faults.planned() or ()
        assert (f.kind, f.rank, f.step, f.phase) == ("kill", None, 6, "step")
        faults.point("step", 5, 0)  # another step: nothing fires
    finally:
        faults.planned.cache_clear()


def test_a_once_file_lets_only_the_first_process_fire(tmp_path: Path) -> None:
    once = str(tmp_path / "fired")
    assert faults._first(once) is True
    assert faults._first(once) is False  # a restarted worker runs on
    assert faults._first(None) is True
