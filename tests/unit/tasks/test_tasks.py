"""Tasks are modules: outside ``clustertune/tasks`` and the recipe schema no code tests a task's
name, every task the schema accepts is registered with its traits, and a new task changes what
training's evaluation reports without a line of the loop changing (the toy task below is the
example the README's architecture section points to)."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import torch

from clustertune.recipe import task_traits
from clustertune.recipe.schema import Task as TaskName
from clustertune.tasks import TASKS, Task, register, task_of
from clustertune.tasks.base import find_task

SRC = Path(__file__).resolve().parents[3] / "src" / "clustertune"
ALLOWED = ("tasks", "recipe")  # the task modules, and the schema that declares each task's traits


def _is_task_name(node: ast.AST) -> bool:
    """``task``, ``<anything>.task`` or ``<mapping>.get("task")``: an expression holding a task's name."""
    if isinstance(node, ast.Name):
        return node.id == "task"
    if isinstance(node, ast.Attribute):
        return node.attr == "task"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "task"
    return False


def task_branches(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            if not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                continue
            if any(_is_task_name(side) for side in (node.left, *node.comparators)):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_outside_tasks_and_the_schema_tests_a_task_name() -> None:
    assert task_branches(SRC) == []


def test_the_scan_finds_a_task_branch(tmp_path: Path) -> None:
    # The check above cannot pass by finding nothing at all.
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "bad.py").write_text(
        "def f(recipe, info, base):\n"
        "    if recipe.task == 'sft': pass\n"
        "    if info.task in ('causal_lm', 'sft'): pass\n"
        "    if base.get('task') != 'rlhf': pass\n"
        "    if recipe.traits.head == 'causal_lm': pass\n")
    assert [line.split(": ", 1)[0] for line in task_branches(tmp_path)] == ["train/bad.py:2", "train/bad.py:3",
                                                                            "train/bad.py:4"]


def test_every_task_the_schema_accepts_is_registered_with_its_traits() -> None:
    names = set(get_args(TaskName))
    assert names == set(TASKS) == set(task_traits.TASK_TRAITS)
    for name in names:
        task = task_of(name)
        assert task.name == name and task.summary and task.model_noun
        assert task.traits is task_traits.TASK_TRAITS[name]
    assert find_task("command") is None  # a user's own command's run has no task


def test_an_unknown_task_is_a_user_error() -> None:
    from clustertune.errors import UserError

    with pytest.raises(UserError, match="task 'ranking' is not known"):
        task_of("ranking")


# -- adding a task: a module with its Task, its traits, its schema name -------------------------


@dataclass(frozen=True)
class BitsPerToken(Task):
    """A toy task: causal language modelling that reports bits per token instead of perplexity."""

    def summary_metrics(self, mean_loss: float, correct_fraction: float) -> dict[str, float]:
        return {"eval_loss": mean_loss, "eval_bits_per_token": mean_loss / math.log(2)}


@pytest.fixture
def toy_task(monkeypatch: pytest.MonkeyPatch) -> Task:
    monkeypatch.setitem(task_traits.TASK_TRAITS, "toy_bits",
                        task_traits.TaskTraits(data="packed_text", head="causal_lm"))
    monkeypatch.setitem(TASKS, "toy_bits", TASKS["causal_lm"])  # removed again after the test
    return register(BitsPerToken(name="toy_bits", summary="bits per token", model_noun="A toy model"))


def test_a_new_task_changes_what_training_evaluates_without_touching_the_loop(toy_task: Task) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.prepare import Arrays
    from clustertune.train.loop import evaluate
    from clustertune.use.evaluate import LocalStrategy

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=16, vocab_size=64)).eval()
    arrays = Arrays(input_ids=np.random.default_rng(0).integers(0, 64, (6, 16)))
    ours: dict[str, Any] = evaluate(model, arrays, "toy_bits", 4, LocalStrategy("cpu"))
    theirs = evaluate(model, arrays, "causal_lm", 4, LocalStrategy("cpu"))
    assert set(ours) == {"eval_loss", "eval_bits_per_token"} and "eval_perplexity" in theirs
    assert ours["eval_loss"] == theirs["eval_loss"]
    assert ours["eval_bits_per_token"] == pytest.approx(theirs["eval_loss"] / math.log(2))
    assert task_of("toy_bits").writes_text and task_of("toy_bits").prepares_data


def test_the_loop_trains_and_evaluates_on_the_loss_its_task_gives(tmp_path: Path) -> None:
    """A task's ``batch_loss`` is what the step minimises and what evaluations average: a toy loss
    (the model's loss scaled to a quarter of it, plus 1) shows in every train and eval row of a
    real run, and the hook saw both training and evaluation batches."""
    import json
    import os
    import subprocess
    import sys

    import yaml

    from tests.helpers import TINY_CAUSAL, with_

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 4, "log_every": 2, "eval_every": 4})))
    code = f"""
import dataclasses, json, sys
from clustertune.tasks import TASKS
from clustertune.cli.main import main
seen = {{"train": 0, "eval": 0}}
def toy(model, batch, forward):
    seen["train" if model.training else "eval"] += 1
    out = forward(model, batch)
    out.loss = out.loss * 0.25 + 1.0
    return out
TASKS["causal_lm"] = dataclasses.replace(TASKS["causal_lm"], batch_loss=toy)
rc = main(["run", {str(recipe)!r}, "--runs-root", {str(tmp_path / "runs")!r}, "--no-progress"])
print(json.dumps({{"rc": rc, **seen}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["rc"] == 0 and seen["train"] == 4 and seen["eval"] > 0, seen
    (metrics,) = (tmp_path / "runs").glob("*/metrics.jsonl")
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    train = [r["loss"] for r in rows if r.get("kind") == "train"]
    evals = [r["eval_loss"] for r in rows if r.get("kind") == "eval"]
    # The tiny model's own loss is near ln(512) = 6.2 at the start: a quarter of it plus 1 is
    # about 2.6, far from both the model's loss and from 1.
    assert train and evals and all(1.0 < v < 3.0 for v in train + evals), (train, evals)


def test_the_reward_models_loss_is_bradley_terrys_over_the_real_pairs_and_counts_wins() -> None:
    """-log sigmoid(chosen - rejected), averaged over the pairs whose label is not -100; a pair is
    right when its chosen text scores strictly higher (a tie is not a win)."""
    from types import SimpleNamespace

    kind = task_of("reward_model")
    scores = torch.tensor([[2.0, 0.5], [0.0, 1.0], [1.0, 1.0], [9.0, -9.0]])  # (chosen, rejected) per pair

    def forward(model: Any, batch: dict[str, Any]) -> Any:
        assert batch["input_ids"].shape == (8, 3) and "labels" not in batch  # both texts in one call
        return SimpleNamespace(logits=scores.reshape(8, 1))

    batch = {"input_ids": torch.zeros(4, 2, 3, dtype=torch.long), "attention_mask": torch.ones(4, 2, 3),
             "labels": torch.tensor([1, 1, 1, -100])}
    out = kind.output(None, batch, forward)
    want = -torch.nn.functional.logsigmoid(scores[:3, 0] - scores[:3, 1]).mean()
    assert out.loss.item() == pytest.approx(want.item())
    assert int(kind.correct(out, batch, 3)) == 1  # only the first: the second lost, the third tied
    assert kind.summary_metrics(0.5, 1 / 3) == {"eval_loss": 0.5, "eval_accuracy": 1 / 3}
    assert not kind.predicts_labels and not kind.writes_text and kind.prepares_data
