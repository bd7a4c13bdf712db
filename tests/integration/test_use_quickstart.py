"""What a new user does after the README's first command: generate from the quickstart run by
its id (a plain causal LM: prompts go as they are), and `chat`, refused for a model without a
chat template until one is named. Shares the session's one quickstart run."""

from __future__ import annotations

import pytest

from clustertune.cli.main import main
from clustertune.runs.store import list_runs
from tests.quickstart_fixture import QuickstartRun


@pytest.mark.slow
def test_generate_and_chat_from_the_quickstart_run(quickstart_cli_run: QuickstartRun,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert quickstart_cli_run.result.returncode == 0, quickstart_cli_run.result.stderr[-2000:]
    root = str(quickstart_cli_run.runs_root)
    run_id = list_runs(root)[0].id
    args = ["--runs-root", root, "--max-new-tokens", "12", "--device", "cpu"]
    assert main(["generate", run_id[:12], "The for statement", "--seed", "5", *args]) == 0
    first = capsys.readouterr().out
    assert main(["generate", run_id[:12], "The for statement", "--seed", "5", *args]) == 0
    assert capsys.readouterr().out == first and first.strip()
    assert main(["chat", run_id[:12], *args]) == 2
    err = capsys.readouterr().err
    assert f"run {run_id} has no chat template" in err and "clustertune generate" in err and "--template" in err
