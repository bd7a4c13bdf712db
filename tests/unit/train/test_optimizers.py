"""``train.optimizer``: each optimizer is the one named, trains, and resumes from its saved state
to the same numbers as an uninterrupted run; what cannot work is refused by name."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

import clustertune as ct
from clustertune.errors import OptimizerError, RecipeError
from clustertune.recipe.load import load_recipe
from clustertune.runs.paths import RunPaths
from clustertune.runs.state import RunState
from clustertune.train.optim import make_optimizer
from tests.helpers import TINY_CAUSAL, read_jsonl, with_
from tests.rl_fixtures import grpo_recipe

OPTIMIZERS = ["adamw", "adafactor", "sgd", "adamw_8bit"]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))


def _steps(model: torch.nn.Module, opt: torch.optim.Optimizer, start: int, n: int) -> None:
    for i in range(start, start + n):
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(16, 64, generator=g), torch.randint(0, 8, (16,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_each_optimizer_resumes_from_its_state_to_the_same_weights(name: str) -> None:
    recipe = load_recipe(with_(TINY_CAUSAL, train={"optimizer": name, "lr": 1e-2, "weight_decay": 0.1}))
    whole = _model()
    opt = make_optimizer(recipe, whole)
    _steps(whole, opt, 0, 6)

    first = _model()
    opt1 = make_optimizer(recipe, first)
    _steps(first, opt1, 0, 3)
    saved_model, saved_opt = io.BytesIO(), io.BytesIO()
    torch.save(first.state_dict(), saved_model)
    torch.save(opt1.state_dict(), saved_opt)
    saved_model.seek(0), saved_opt.seek(0)
    resumed = _model()
    resumed.load_state_dict(torch.load(saved_model))
    opt2 = make_optimizer(recipe, resumed)
    opt2.load_state_dict(torch.load(saved_opt))
    _steps(resumed, opt2, 3, 3)
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(next(whole.parameters()), next(_model().parameters()))  # it did train


def test_the_optimizer_named_is_the_one_built() -> None:
    def built(**train: object) -> torch.optim.Optimizer:
        return make_optimizer(load_recipe(with_(TINY_CAUSAL, train=train)), _model())

    assert type(built(optimizer="sgd", momentum=0.5)).__name__ == "SGD"
    assert built(optimizer="sgd", momentum=0.5).defaults["momentum"] == 0.5
    assert type(built(optimizer="adafactor")).__name__ == "Adafactor"
    eight = built(optimizer="adamw_bnb_8bit")  # TrainingArguments' spelling
    assert type(eight).__name__ == "AdamW8bit"
    decays = sorted(g["weight_decay"] for g in built(optimizer="adafactor", weight_decay=0.1).param_groups)
    assert decays == [0.0, 0.1]  # never on biases and norms
    with pytest.raises(OptimizerError, match="paged_adamw_8bit.*on the CPU there is nothing to page: use adamw_8bit"):
        built(optimizer="paged_adamw_8bit")


@pytest.mark.parametrize(("train", "key", "words"), [
    ({"optimizer": "lion"}, "train.optimizer", "'adamw', 'adafactor', 'sgd', 'adamw_8bit' or 'paged_adamw_8bit'"),
    ({"optimizer": "sgd", "strategy": "deepspeed"}, "train.optimizer", "DeepSpeed builds the optimizer its config names"),
    ({"optimizer": "adamw_8bit", "strategy": "fsdp"}, "train.optimizer", "does not shard with FSDP"),
    ({"optim": "adamw_torch"}, "train.optim", "did you mean 'train.optimizer'"),
    ({"momentum": 1.5}, "train.momentum", "less than 1"),
])
def test_bad_optimizer_settings_name_the_key(train: dict, key: str, words: str) -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe(with_(TINY_CAUSAL, train=train))
    assert key in str(exc.value) and words in str(exc.value)


def test_rl_runs_hand_the_optimizer_to_trls_trainer(tmp_path: Path) -> None:
    from clustertune.train.rl.runner import trainer_args

    plain = grpo_recipe("policy-dir", tmp_path)
    for name, trl_name in [("sgd", "sgd"), ("adafactor", "adafactor"), ("adamw_8bit", "adamw_bnb_8bit")]:
        rl = load_recipe(plain | {"train": {**plain["train"], "optimizer": name, "momentum": 0.8}})
        args = trainer_args(rl, RunPaths(tmp_path / "run"), [1.0])
        assert args.optim == trl_name
        assert (args.optim_args == "momentum=0.8") == (name == "sgd")


@pytest.mark.parametrize("name", ["adafactor", "adamw_8bit"])
def test_a_run_trains_with_the_optimizer_and_checkpoints_its_state(name: str, runs_root: Path) -> None:
    recipe = with_(TINY_CAUSAL, train={"optimizer": name, "max_steps": 8, "save_every": 4, "eval_at_start": False})
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    losses = [r["loss"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]
    assert losses[-1] < losses[0]
    assert run.paths.complete_checkpoints()
