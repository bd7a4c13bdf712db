"""``clustertune eval`` through the CLI's entry point, in process (the console script itself is
exercised by the other CLI tests): a run's own metrics printed and written to its evals/,
``runs show`` listing them, and bad input exiting 2 with the fix and no traceback."""

from __future__ import annotations

import json

import pytest

import clustertune as ct
from clustertune.cli.main import main


def test_eval_prints_writes_and_runs_show_lists_it(tiny_policy_run: ct.Run, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tiny_policy_run.paths.root.parent)
    evals = tiny_policy_run.paths.evals
    before = set(evals.glob("*.json")) if evals.is_dir() else set()
    assert main(["eval", tiny_policy_run.id, "--runs-root", root, "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert f"run {tiny_policy_run.id}: metrics on validation" in out and "eval_perplexity" in out
    (new,) = set(evals.glob("*.json")) - before
    assert f"written to {new}" in out and json.loads(new.read_text())["samples"] == 32
    assert main(["runs", "show", tiny_policy_run.id, "--runs-root", root]) == 0
    assert f"evals     {evals} (" in capsys.readouterr().out


def test_bad_eval_input_exits_2_with_the_fix(tiny_policy_run: ct.Run, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tiny_policy_run.paths.root.parent)
    for args, needle in [
        (["eval", tiny_policy_run.id, "--limit", "3"], "--limit only go with --tasks"),
        (["eval", tiny_policy_run.id, "--tasks", "x", "--data", "builtin:pydoc"], "--tasks runs lm-eval's own data"),
        (["eval", "no-such-run"], "no run 'no-such-run'"),
        (["eval", str(tiny_policy_run.paths.model)], "name the data with --data"),
    ]:
        assert main([*args, "--runs-root", root]) == 2, args
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, (args, err)
