"""What ``train.precision: auto`` became on this machine is written down: each attempt's
``precision`` in run.json and ``precision`` in summary.json; a pinned precision is kept."""

from __future__ import annotations

from pathlib import Path

from clustertune import api
from clustertune.runs.report import show_text
from clustertune.train.strategies.group import cpu_bf16
from tests.helpers import TINY_CAUSAL, with_


def test_a_run_records_the_precision_auto_resolved_to(runs_root: Path) -> None:
    want = "bf16" if cpu_bf16() else "fp32"  # this CPU's flags decide (no GPU in the suite)
    auto = api.run(with_(TINY_CAUSAL, train={"precision": "auto", "max_steps": 2, "eval_at_start": False}),
                   show_progress=False)
    assert auto.state.value == "COMPLETED", auto.info.reason
    assert auto.attempts[0].precision == want and auto.summary["precision"] == want
    assert f"pid {auto.attempts[0].pid}  {want}" in show_text(auto)  # `clustertune runs show` says it
    pinned = api.run(with_(TINY_CAUSAL, train={"max_steps": 2, "eval_at_start": False}), show_progress=False)
    assert pinned.attempts[0].precision == "fp32" and pinned.summary["precision"] == "fp32"


def test_a_run_takes_its_own_precision_after_another_accelerator_in_the_process(runs_root: Path) -> None:
    from accelerate import Accelerator

    Accelerator(cpu=True, mixed_precision="no")  # what a user's Trainer leaves behind in a notebook
    run = api.run(with_(TINY_CAUSAL, train={"precision": "bf16", "max_steps": 2, "eval_at_start": False}),
                  show_progress=False)
    assert run.state.value == "COMPLETED", run.info.reason
    assert run.attempts[0].precision == "bf16"
