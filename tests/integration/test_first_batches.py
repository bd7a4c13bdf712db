"""The checks on the first batches, run by `run` itself: which ones apply, their line in the log
and their record in run.json, `train.preflight=false`, and a broken forward (one that keeps a KV
cache, so packed examples see each other) stopping the checks without a trace on the random
generators or the model's mode."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from clustertune import api
from clustertune.data.staging import open_run_data
from clustertune.recipe.load import load_recipe
from clustertune.runs.run import Run
from clustertune.train import first_batches
from clustertune.use.load import load_for_use
from tests.helpers import TINY_CAUSAL, with_
from tests.sft_fixtures import arithmetic_rows, sft_recipe, write_jsonl

PACKED = ["trained tokens in every batch", "packed loss equals unpacked", "no attention across packed examples",
          "adapter trains its targets", "chat template markers are single tokens"]


@pytest.fixture(scope="module")
def packed_run(chat_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    where = tmp_path_factory.mktemp("packed")
    train = write_jsonl(where / "train.jsonl", arithmetic_rows(60))
    recipe = sft_recipe(chat_base, train, where / "runs", sft={"packing": True})
    recipe["train"].update(max_steps=2, log_every=1)
    recipe["data"]["sft"].update(generation_samples=0)
    # LoRA on the embeddings too, as the SFT demo trains: PEFT wraps the embedding layer
    recipe["model"]["adapter"] = {"type": "lora", "rank": 4, "target_modules": ["c_attn", "wte"]}
    return api.run(recipe, show_progress=False)


def test_a_packed_sft_run_records_its_checks(packed_run: Run) -> None:
    assert packed_run.state.value == "COMPLETED", packed_run.info.reason
    record = packed_run.attempts[0].preflight
    assert record is not None and record["failed"] == [], record
    assert [re.sub(r" \(.*\)$", "", p) for p in record["passed"]] == PACKED, record
    assert re.search(r"adapter trains its targets \([1-9][\d,]* parameters\)", " ".join(record["passed"]))
    assert "preflight: 5 checks passed" in packed_run.paths.log.read_text()


def test_a_model_built_from_a_config_starts_near_ln_vocab_and_the_switch_turns_checks_off(runs_root: Path) -> None:
    run = api.run(with_(TINY_CAUSAL, train={"max_steps": 2, "eval_at_start": False}), show_progress=False)
    assert run.attempts[0].preflight == {"passed": ["first loss near ln(vocab)"], "warnings": [], "failed": []}
    off = api.run(with_(TINY_CAUSAL, train={"max_steps": 2, "eval_at_start": False, "preflight": False}),
                  show_progress=False)
    assert off.state.value == "COMPLETED" and off.attempts[0].preflight is None
    assert not off.paths.preflight.exists()


def _with_cache(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> object:
    return model(**batch, use_cache=True)  # the cache skips the block-diagonal mask of packed rows


def test_a_forward_that_lets_packed_examples_meet_fails_the_checks_and_leaves_no_trace(packed_run: Run) -> None:
    recipe = load_recipe(packed_run.paths.recipe)
    loaded = load_for_use(str(packed_run.paths.root), device="cpu", dtype="fp32")
    model = loaded.model.train()
    train_arrays, _ = open_run_data(recipe, packed_run.paths, 0, None)
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    before = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    with pytest.raises(first_batches.PreflightError) as e:
        first_batches.run_checks(recipe, model, train_arrays, loaded.tokenizer, processes=1,
                                 device=torch.device("cpu"), forward=_with_cache, fresh_model=False)
    assert "packed loss equals unpacked" in str(e.value) and "packing=false" in str(e.value)
    assert "train.preflight=false" in str(e.value)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == before
    assert model.training
    # and the run's own record file is what run.json copied
    assert json.loads(packed_run.paths.preflight.read_text())["passed"] == record_of(packed_run)


def record_of(run: Run) -> list[str]:
    return run.attempts[0].preflight["passed"]


def test_the_checks_run_where_the_weights_are_before_the_strategy_places_the_model(packed_run: Run) -> None:
    # On a GPU the strategy's device is cuda while the model is still on the host: the checks run
    # before the loop moves it. Here the strategy names a device no weight is on (meta).
    from clustertune.train.loop import forward

    recipe = load_recipe(packed_run.paths.recipe)
    loaded = load_for_use(str(packed_run.paths.root), device="cpu", dtype="fp32")  # the adapter merged
    recipe = recipe.model_copy(update={"model": recipe.model.model_copy(update={"adapter": None})})
    train_arrays, _ = open_run_data(recipe, packed_run.paths, 0, None)
    report = first_batches.run_checks(recipe, loaded.model, train_arrays, loaded.tokenizer, processes=1,
                                      device=torch.device("meta"), forward=forward, fresh_model=False)
    assert "packed loss equals unpacked" in report.passed and report.failed == []
