"""Bad sweeps, as a tired user types them: each is exit 2 with the key (and the trial) named, and
nothing is started or written under the runs root. Run through the CLI in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import TINY_CAUSAL, cli_here


@pytest.fixture
def tiny(tmp_path: Path, runs_root: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_CAUSAL), encoding="utf-8")
    return path


def _refused(*args: str) -> str:
    out = cli_here("sweep", *args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    return out.stderr


def _nothing_under(root: Path) -> None:
    assert not root.exists() or not any(root.iterdir()), sorted(p.name for p in root.iterdir())


def test_an_unknown_key_is_named_once_for_the_whole_sweep(tiny: Path, runs_root: Path) -> None:
    err = _refused(str(tiny), "train.lrr=1e-3,3e-3", "train.seed=0,1")
    assert "every trial of the sweep fails the same check; nothing was submitted" in err
    assert "train.lrr" in err and "train.lr" in err  # the key, and the one meant
    _nothing_under(runs_root)


def test_a_wrong_value_in_one_combination_names_that_trial_and_its_values(tiny: Path, runs_root: Path) -> None:
    err = _refused(str(tiny), "train.max_steps=4,eight", "train.seed=0,1")
    assert "2 of 4 trials cannot run; nothing was submitted" in err
    assert "trial 2 (train.max_steps=eight train.seed=0)" in err and "trial 3 (train.max_steps=eight train.seed=1)" in err
    assert "trial 0 (" not in err and "train.max_steps" in err
    _nothing_under(runs_root)


@pytest.mark.parametrize(("args", "expect"), [
    (["train.seed=range(3,3)"], "range(3, 3) with step 1 is empty"),
    (["train.lr=1e-3,,3e-3"], "an empty value in the list"),
    (["train.lr=interval(1e-4,1e-3)"], "is an interval, which a grid cannot walk"),
    (["train.max_steps=4"], "a sweep needs at least one swept key"),
    (["train.seed=0,1", "--random", "3"], "3 trials asked of a space with 2 combinations"),
    (["train.seed=0,1", "--max-concurrent", "2"], "--max-concurrent is the SLURM array's %C"),
    (["train.seed=0,1", "--direction", "down"], "--direction 'down': give min or max"),
])
def test_a_space_that_cannot_be_run_is_refused_before_any_trial(tiny: Path, runs_root: Path, args: list[str],
                                                                 expect: str) -> None:
    assert expect in _refused(str(tiny), *args)
    _nothing_under(runs_root)


def test_show_and_resume_of_a_sweep_that_does_not_exist_say_how_to_find_one(runs_root: Path) -> None:
    for verb in ("show", "resume", "cancel"):
        err = _refused(verb, "nosuch-sweep")
        assert "nosuch-sweep" in err and "clustertune sweeps" in err, err
    assert "takes one sweep id" in _refused("show")


def test_the_help_shows_the_syntax_and_one_example_per_backend() -> None:
    out = cli_here("sweep", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    for expect in ("range(1e-4,1e-3,num=4,log)", "choice(8,16)", "x='a,b'", "local: clustertune sweep quickstart",
                   "ssh: clustertune sweep", "launch.backend=ssh", "slurm: clustertune sweep", "--array=0-2%2",
                   "sweep resume ID"):
        assert expect in text, expect
