"""A sweep's space as Hydra's multirun writes it: lists, ranges, choices, intervals, quoting, and
every problem reported at once naming its key."""

from __future__ import annotations

import math

import pytest

from clustertune.errors import RecipeError
from clustertune.recipe.sweep_space import grid, parse_space, random_trials, split_top_level, trial_overrides


def _values(arg: str) -> tuple[str, ...]:
    (axis,) = parse_space([arg]).axes
    return axis.values


def test_lists_ranges_and_choices_expand_as_hydra_writes_them() -> None:
    assert _values("train.lr=1e-4,3e-4,1e-3") == ("1e-4", "3e-4", "1e-3")
    assert _values("train.seed=range(0,4)") == ("0", "1", "2", "3")  # stop left out
    assert _values("train.seed=range(1,10,3)") == ("1", "4", "7")
    assert _values("x=range(0,1,0.25)") == ("0.0", "0.25", "0.5", "0.75")
    assert _values("model.adapter.r=choice(8,16,32)") == ("8", "16", "32")
    # num=N: N values, both ends included; with log, evenly spaced in log.
    assert _values("x=range(0,10,num=3)") == ("0", "5", "10")
    lr = [float(v) for v in _values("train.lr=range(1e-4,1e-2,num=3,log)")]
    assert lr == [1e-4, 1e-3, 1e-2]
    assert [float(v) for v in _values("train.lr=range(1e-4,1e-3,num=4,log)")] == pytest.approx(
        [1e-4 * 10 ** (i / 3) for i in range(4)], rel=1e-9)


def test_quotes_and_brackets_keep_their_commas() -> None:
    assert split_top_level("'a,b',c") == ["'a,b'", "c"]
    assert split_top_level('[1,2],{x: 1, y: 2},"p,q"') == ["[1,2]", "{x: 1, y: 2}", '"p,q"']
    space = parse_space(["data.text_column='a,b'", "train.betas=[0.9,0.95]", "train.lr=1e-3,2e-3"])
    # A quoted value or a list with commas is one fixed value, not a sweep.
    assert space.fixed == ("data.text_column='a,b'", "train.betas=[0.9,0.95]")
    assert space.keys() == ["train.lr"]
    assert _values("data.text_column='a,b','c'") == ("'a,b'", "'c'")


def test_the_grid_is_every_combination_the_last_key_fastest() -> None:
    space = parse_space(["train.max_steps=8", "train.lr=1e-3,3e-3", "train.seed=0,1,2"])
    trials = grid(space)
    assert len(trials) == space.grid_size == 6
    assert trials[:3] == [{"train.lr": "1e-3", "train.seed": s} for s in ("0", "1", "2")]
    assert trials[3] == {"train.lr": "3e-3", "train.seed": "0"}
    assert trial_overrides(space, trials[4]) == ["train.max_steps=8", "train.lr=3e-3", "train.seed=1"]


def test_random_trials_are_distinct_grid_points_or_draws_within_the_interval() -> None:
    space = parse_space(["a=1,2,3,4", "b=x,y"])
    drawn = random_trials(space, 5, seed=3)
    assert len({tuple(t.items()) for t in drawn}) == 5 and all(t in grid(space) for t in drawn)
    assert drawn == random_trials(space, 5, seed=3) and drawn != random_trials(space, 5, seed=4)
    with pytest.raises(RecipeError, match="9 trials asked of a space with 8 combinations"):
        random_trials(space, 9)

    space = parse_space(["train.lr=interval(1e-5,1e-2,log)", "train.seed=0,1"])
    assert space.grid_size is None
    lrs = [float(t["train.lr"]) for t in random_trials(space, 40, seed=0)]
    assert all(1e-5 <= v <= 1e-2 for v in lrs)
    # Log-uniform: about half the draws below the geometric middle (3.2e-4), not a tenth.
    below = sum(v < math.sqrt(1e-5 * 1e-2) for v in lrs)
    assert 10 <= below <= 30
    with pytest.raises(RecipeError, match="train.lr.*interval, which a grid cannot walk"):
        grid(space)


def test_every_problem_is_reported_at_once_naming_its_key() -> None:
    with pytest.raises(RecipeError) as exc:
        parse_space(["train.seed=range(5,1)", "train.lr=1e-3,,2e-3", "nokey", "x=range(1e-4,1e-3,num=4,log,base=2)",
                     "y=interval(3,1)", "z=range(0,1,log)", "w=choice()", "train.seed=1,2", "v=range(-1,1,num=3,log)"])
    text = str(exc.value)
    assert "recipe has 9 problems" in text
    for expect in ("train.seed: 'range(5,1)'", "is empty (stop is left out", "train.lr: '1e-3,,2e-3'",
                   "an empty value in the list", "nokey: must look like key=value", "not base",
                   "interval(3, 1) is empty", "log goes with num=N", "choice() needs at least one value",
                   "train.seed: is given twice", "a log range needs start and stop above 0"):
        assert expect in text, expect
    assert all(p.file == "<sweep>" for p in exc.value.problems)
