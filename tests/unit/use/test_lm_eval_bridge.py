"""lm-eval tasks on a trained run, offline: a task defined in a local YAML file over a local
jsonl dataset with a metric lm-eval implements itself (acc), through the same HFLM wrapper
hub tasks use (those need internet and are not run here); and the typed errors."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import EvalError
from clustertune.extras import install_hint
from clustertune.use.evaluate import evaluate_lm_eval

QUESTIONS = [
    ("The keyword that defines a function is", ["def", "class", "while"], 0),
    ("A loop over items starts with", ["import", "for", "return"], 1),
    ("To leave a function with a value, use", ["pass", "yield from", "return"], 2),
    ("A new type is made with", ["class", "lambda", "global"], 0),
]


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lm-eval-tasks")
    data = d / "python_mc.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n" for q, c, a in QUESTIONS))
    (d / "python_mc.yaml").write_text(f"""\
task: ct_python_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
""")
    return d


def test_a_local_task_runs_offline_and_its_result_lands_in_the_run(tiny_policy_run: ct.Run, task_dir: Path) -> None:
    res = evaluate_lm_eval(tiny_policy_run.id, ["ct_python_mc"], include_path=str(task_dir), limit=3,
                           runs_root=tiny_policy_run.paths.root.parent, device="cpu", dtype="fp32", batch_size=4)
    acc = res.metrics["ct_python_mc/acc"]
    assert acc in (0.0, 1 / 3, 2 / 3, 1.0)  # three questions scored
    assert res.payload["n-samples"]["ct_python_mc"]["effective"] == 3
    saved = json.loads(res.path.read_text())
    assert res.path.parent == tiny_policy_run.paths.evals and saved["kind"] == "lm-eval"
    assert saved["results"]["ct_python_mc"]["acc,none"] == pytest.approx(acc)


def test_what_lm_eval_cannot_run_is_a_typed_error(tiny_policy_run: ct.Run, task_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tiny_policy_run.paths.root.parent
    # A name found neither in the directory nor in lm-eval's registry (indexed once: seconds).
    with pytest.raises(EvalError, match=r"unknown task 'ct_python_mcq' \(did you mean ct_python_mc\b.*"
                                        r"your own YAML files need --include-path DIR"):
        evaluate_lm_eval(tiny_policy_run.id, ["ct_python_mcq"], include_path=str(task_dir), runs_root=root)
    with pytest.raises(EvalError, match=r"--include-path .*nowhere: no such directory"):
        evaluate_lm_eval(tiny_policy_run.id, ["ct_python_mc"], include_path=str(tmp_path / "nowhere"), runs_root=root)
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # as if the extra were not installed
    with pytest.raises(EvalError, match=re.escape(f"`{install_hint('lm-eval')}`")):
        evaluate_lm_eval(tiny_policy_run.id, ["ct_python_mc"], include_path=str(task_dir), runs_root=root)
