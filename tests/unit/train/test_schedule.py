"""One learning-rate schedule for supervised and RL runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clustertune.recipe.load import load_recipe
from clustertune.runs.paths import RunPaths
from clustertune.train.schedule import make_scheduler, warmup_steps
from tests.helpers import TINY_CAUSAL, with_
from tests.rl_fixtures import grpo_recipe


def _lrs(scheduler: object, optimizer: torch.optim.Optimizer, steps: int) -> list[float]:
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("train", [
    {"lr_scheduler": "cosine", "warmup_ratio": 0.25},
    {"lr_scheduler": "linear", "warmup_steps": 3},
    {"lr_scheduler": "constant", "warmup_ratio": 0.1},
    {"lr_scheduler": "cosine", "warmup_steps": 19},
])
def test_supervised_and_rl_runs_follow_the_same_schedule(tmp_path: Path, train: dict) -> None:
    from transformers import get_scheduler

    from clustertune.train.rl.runner import trainer_args

    steps = 20
    settings = {"max_steps": steps, "lr": 1e-3, "warmup_steps": 0, "warmup_ratio": 0.0, **train}
    supervised = load_recipe(with_(TINY_CAUSAL, train=settings))
    rl_plain = grpo_recipe("policy-dir", tmp_path)
    rl = load_recipe(rl_plain | {"train": {**rl_plain["train"], **settings}})
    assert supervised.train.lr_scheduler == rl.train.lr_scheduler

    p1 = torch.nn.Parameter(torch.zeros(2))
    opt1 = torch.optim.SGD([p1], lr=1e-3)
    ours = _lrs(make_scheduler(supervised, opt1, steps), opt1, steps)

    # TRL's trainers build their scheduler from TrainingArguments the way transformers does.
    args = trainer_args(rl, RunPaths(tmp_path / "run"), [1.0])
    p2 = torch.nn.Parameter(torch.zeros(2))
    opt2 = torch.optim.SGD([p2], lr=1e-3)
    theirs_sched = get_scheduler(args.lr_scheduler_type, opt2, num_warmup_steps=args.get_warmup_steps(steps),
                                 num_training_steps=steps)
    assert _lrs(theirs_sched, opt2, steps) == pytest.approx(ours)
    warm = warmup_steps(supervised.train, steps)
    assert warm > 0 and ours[0] < ours[warm - 1]  # it does warm up
    # The state a checkpoint keeps loads into transformers' scheduler, and back.
    theirs_sched.load_state_dict(make_scheduler(supervised, opt1, steps).state_dict())
    make_scheduler(supervised, opt1, steps).load_state_dict(theirs_sched.state_dict())


def test_an_rl_run_counted_in_epochs_still_warms_up_by_its_ratio(tmp_path: Path) -> None:
    from clustertune.train.rl.runner import trainer_args

    rl_plain = grpo_recipe("policy-dir", tmp_path)
    rl = load_recipe(rl_plain | {"train": {**rl_plain["train"], "max_steps": None, "epochs": 2,
                                           "warmup_steps": 0, "warmup_ratio": 0.15}})
    args = trainer_args(rl, RunPaths(tmp_path / "run"), [1.0])
    # Over the 37 steps the trainer will count: ceil(0.15 * 37) = 6, as the supervised rule gives.
    supervised = load_recipe(with_(TINY_CAUSAL, train={"max_steps": 37, "warmup_steps": 0, "warmup_ratio": 0.15}))
    assert args.get_warmup_steps(37) == warmup_steps(supervised.train, 37) == 6
