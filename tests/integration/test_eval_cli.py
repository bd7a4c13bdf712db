"""``clustertune eval`` through the CLI: a run's own metrics printed and written to its evals/
(the real console script, once), ``runs show`` listing them, and bad input exiting 2 with the
fix and no traceback (in process)."""

from __future__ import annotations

import json

import pytest

import clustertune as ct
from clustertune.cli.main import main
from tests.helpers import cli


def test_eval_prints_writes_and_runs_show_lists_it(tiny_policy_run: ct.Run, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tiny_policy_run.paths.root.parent)
    evals = tiny_policy_run.paths.evals
    before = set(evals.glob("*.json")) if evals.is_dir() else set()
    res = cli("eval", tiny_policy_run.id, "--runs-root", root, "--device", "cpu")
    assert res.returncode == 0, res.stderr
    assert f"run {tiny_policy_run.id}: metrics on validation" in res.stdout and "eval_perplexity" in res.stdout
    (new,) = set(evals.glob("*.json")) - before
    assert f"written to {new}" in res.stdout and json.loads(new.read_text())["samples"] == 32
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
