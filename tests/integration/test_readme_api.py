"""The README's Python example runs as written and prints what its comments say (only the
length of training is cut, so the test stays fast)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_python_example() -> str:
    section = README.read_text(encoding="utf-8").split("The same from Python:", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_python_example_runs_as_written(runs_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = readme_python_example()
    assert '["train.max_steps=50"]' in code and "[0, 50]" in code
    short = code.replace('["train.max_steps=50"]', '["train.max_steps=2", "train.eval_every=2", "model.config_overrides.n_layer=1"]')
    exec(compile(short, str(README), "exec"), {"__name__": "readme"})
    state_and_model, final_eval, eval_steps, again = capsys.readouterr().out.splitlines()
    m = re.fullmatch(r"COMPLETED (\S+)", state_and_model)
    assert m and Path(m.group(1)).parent.parent == runs_root and Path(m.group(1)).name == "model", state_and_model
    assert Path(m.group(1), "config.json").is_file()
    figures = ast.literal_eval(final_eval)
    assert set(figures) == {"eval_loss", "eval_perplexity"} and figures["eval_perplexity"] > 1
    assert eval_steps == "[0, 2]"
    assert again == "COMPLETED"


def test_run_state_prints_as_the_cli_shows_it() -> None:
    from clustertune.runs.state import RunState

    assert str(RunState.COMPLETED) == "COMPLETED" and f"{RunState.FAILED}" == "FAILED"
    assert RunState("COMPLETED") is RunState.COMPLETED and RunState.COMPLETED == "COMPLETED"
