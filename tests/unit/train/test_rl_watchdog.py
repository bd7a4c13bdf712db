"""An RL run's hang watchdog counts TRL's steps only: our samples and evaluations run with it held
off, and so do the evaluation and checkpoint the trainer makes after a step, until the next
step begins."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from clustertune.recipe.load import load_recipe
from clustertune.runs.paths import RunPaths
from clustertune.train.rl.callbacks import EvalSet, RunCallback
from clustertune.train.stop import StopFlag
from tests.rl_fixtures import grpo_recipe


class Noted(StopFlag):
    """The real flag (no timer: no limit set), noting what the callback asks of it."""

    def __init__(self) -> None:
        super().__init__(None, install_handlers=False)
        self.asked: list[str] = []

    def beat(self) -> None:
        self.asked.append("beat")
        self._armed = True  # as a flag with a limit would be

    def hold(self) -> bool:
        held = super().hold()
        if held:
            self.asked.append("held")
        return held

    def release(self) -> None:
        if self._held:
            self.asked.append("released")
        super().release()


def _callback(tmp_path: Path, **train: Any) -> tuple[RunCallback, Noted]:
    raw = grpo_recipe("run:unused", tmp_path)
    raw["train"].update(train)
    flag = Noted()
    cb = RunCallback(load_recipe(raw), RunPaths(tmp_path), None, [], EvalSet(), "", False, False, stop=flag)
    cb.write_samples = lambda model, step: flag.asked.append("samples")  # type: ignore[method-assign]
    cb.evaluate = lambda model, step: flag.asked.append("evaluate") or {}  # type: ignore[method-assign]
    return cb, flag


def _step(cb: RunCallback, step: int, save: bool = False) -> SimpleNamespace:
    state = SimpleNamespace(global_step=step, max_steps=40)
    control = SimpleNamespace(should_save=save, should_evaluate=False)
    cb.on_step_begin(None, state, control)
    cb.on_step_end(None, state, control, model=None)
    return control


def test_a_step_followed_by_the_trainers_checkpoint_is_held_until_the_next_step(tmp_path: Path) -> None:
    cb, flag = _callback(tmp_path, log_every=100)
    _step(cb, 1)
    assert flag.asked == ["beat"]  # a plain step: watched from its end
    flag.asked.clear()
    _step(cb, 2, save=True)
    assert flag.asked == ["beat", "held"]  # the trainer saves after this hook
    flag.asked.clear()
    _step(cb, 3)
    assert flag.asked == ["released", "beat", "beat"]  # the next step begins: watched again at once


def test_our_samples_and_evaluations_run_with_the_watchdog_held(tmp_path: Path) -> None:
    cb, flag = _callback(tmp_path, log_every=100, eval_every=5)
    cb.rl = cb.rl.model_copy(update={"sample_every": 5})
    _step(cb, 4)
    flag.asked.clear()
    _step(cb, 5)
    assert flag.asked == ["held", "samples", "evaluate", "released", "beat", "beat"]
