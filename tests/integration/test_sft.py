"""SFT runs end to end: in process, under two ranks, on the SLURM test cluster; the demo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import clustertune as ct
from clustertune.data.templates import BUILTIN_TEMPLATES
from clustertune.runs.state import RunState
from tests.helpers import read_jsonl
from tests.sft_fixtures import arithmetic_rows, sft_recipe, write_jsonl

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)


def _losses(run: Any) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"}


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "chat.jsonl", arithmetic_rows(120))


def test_sft_run_trains_evaluates_generation_and_saves_the_template(sft_base: Path, chat_file: Path,
                                                                    runs_root: Path) -> None:
    from clustertune.runs.report import generation_change, plot

    recipe = sft_recipe(sft_base, chat_file, sft={"packing": True})
    recipe["train"].update({"max_steps": 6, "eval_at_start": True})
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    rows = read_jsonl(run.paths.metrics)
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [e["step"] for e in evals] == [0, 6]
    for e in evals:
        assert 0.0 <= e["eval_exact_match"] <= e["eval_contains"] <= 1.0 and e["eval_loss"] > 0
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert "exact match" in (generation_change(rows) or "")
    assert plot(run).is_file()
    config = json.loads((run.paths.model / "tokenizer_config.json").read_text())
    template = config.get("chat_template") or (run.paths.model / "chat_template.jinja").read_text()
    assert template == BUILTIN_TEMPLATES["chatml"]

    # The output layer and loss fused (train.fused_loss): the same run, step for step.
    recipe["train"]["fused_loss"] = True
    fused = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert fused.state is RunState.COMPLETED, fused.info.reason
    assert _losses(fused) == pytest.approx(_losses(run), rel=1e-5)
    fused_evals = [r for r in read_jsonl(fused.paths.metrics) if r["kind"] == "eval"]
    assert [e["eval_loss"] for e in fused_evals] == pytest.approx([e["eval_loss"] for e in evals], rel=1e-5)


def test_lora_under_two_ranks_matches_one_rank_with_twice_the_batch(sft_base: Path, chat_file: Path,
                                                                    runs_root: Path) -> None:
    """The loss is a mean over the global batch's trained tokens, so 2 ranks x 2 examples equal
    1 rank x 4 examples although the ranks hold different numbers of labels."""
    from clustertune import api

    steps = {"max_steps": 4, "log_every": 1, "eval_at_start": False}
    lora = {"name_or_path": str(sft_base), "adapter": {"type": "lora", "rank": 8}}
    r1 = sft_recipe(sft_base, chat_file)
    r1["train"].update(steps)
    r1["model"] = lora
    one = ct.run(ct.load_recipe(r1), show_progress=False)
    assert (one.paths.model / "adapter_config.json").is_file()
    r2 = sft_recipe(sft_base, chat_file)
    r2["model"] = lora
    r2["train"].update({**steps, "batch_size": 2})
    r2["launch"] = {"procs_per_node": 2}
    two = api.run(ct.load_recipe(r2))
    assert one.state is RunState.COMPLETED and two.state is RunState.COMPLETED, two.info.reason
    a, b = _losses(one), _losses(two)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
    assert worst <= 1e-4, worst


@pytest.mark.usefixtures("slurm_cluster")
def test_sft_recipe_runs_on_the_slurm_cluster(sft_base: Path, chat_file: Path, runs_root: Path) -> None:
    from clustertune.launch import job_for
    from clustertune import api
    from clustertune.runs.store import get_run

    recipe = sft_recipe(sft_base, chat_file, sft={"packing": True})
    recipe["train"].update({"max_steps": 4, "log_every": 2})
    recipe["launch"] = {"backend": "slurm", "procs_per_node": 1, "cpus_per_task": 1}
    submitted = api.run(ct.load_recipe(recipe))
    state = job_for(get_run(submitted.id)).wait(timeout=300)
    run = get_run(submitted.id)
    assert state is RunState.COMPLETED, f"{run.info.reason}\n{job_for(run).logs()}"
    evals = [r for r in read_jsonl(run.paths.metrics) if r["kind"] == "eval"]
    assert evals and "eval_exact_match" in evals[-1]
    assert (run.paths.model / "config.json").is_file()
