"""Bad input through the CLI app in this process: exit 2, one message that names the key or
path, no traceback, and nothing written (no run directory, no saved cluster)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from clustertune.cli.main import main
from tests.helpers import TINY_CAUSAL, with_


def _recipe(d: Path, data: dict | None = None, name: str = "r.yaml") -> str:
    p = d / name
    p.write_text(yaml.safe_dump(with_(TINY_CAUSAL, data=data) if data else TINY_CAUSAL))
    return str(p)


def _files_recipe(d: Path, make: Callable[[Path], None]) -> str:
    target = d / "train.jsonl"
    make(target)
    return _recipe(d, {"dataset": None, "train_files": [str(target)]})


def _binary(d: Path) -> str:
    (d / "bin.yaml").write_bytes(b"\xff\xfe\x00\x01name: x\n")
    return str(d / "bin.yaml")


def _duplicate_key(d: Path) -> str:
    (d / "dup.yaml").write_text(yaml.safe_dump(TINY_CAUSAL) + "name: other\n")
    return str(d / "dup.yaml")


def _loop(p: Path) -> None:
    os.symlink(p, p)


# (id, recipe maker, extra arguments, what the message must name)
RUN_CASES: list[tuple[str, Callable[[Path], str], list[str], str]] = [
    ("recipe-not-utf8", _binary, [], "is not a UTF-8 text file"),
    ("duplicate-yaml-key", _duplicate_key, [], "key 'name' appears twice"),
    ("negative-seed", _recipe, ["train.seed=-1"], "train.seed"),
    ("seed-too-large", _recipe, ["train.seed=4294967296"], "train.seed"),
    ("boolean-batch-size", _recipe, ["train.batch_size=true"], "train.batch_size"),
    ("boolean-max-steps", _recipe, ["train.max_steps=false"], "train.max_steps"),
    ("huge-block-size", _recipe, ["data.block_size=1e11"], "data.block_size"),
    ("infinite-lr", _recipe, ["train.lr=.inf"], "train.lr"),
    ("nan-weight-decay", _recipe, ["train.weight_decay=.nan"], "train.weight_decay"),
    ("nan-warmup-ratio", _recipe, ["train.warmup_ratio=.nan"], "train.warmup_ratio"),
    ("infinite-adam-eps", _recipe, ["train.adam_eps=.inf"], "train.adam_eps"),
    ("infinite-grad-clip", _recipe, ["train.max_grad_norm=.inf"], "train.max_grad_norm"),
    ("infinite-epochs", _recipe, ["train.epochs=.inf", "train.max_steps=null"], "train.epochs"),
    ("negative-n-layer", _recipe, ["model.config_overrides.n_layer=-1"], "n_layer=-1"),
    ("zero-heads", _recipe, ["model.config_overrides.n_head=0"], "n_head=0"),
    ("train-file-fifo", lambda d: _files_recipe(d, lambda p: os.mkfifo(p)), [], "not a regular file"),
    ("train-file-directory", lambda d: _files_recipe(d, lambda p: p.mkdir()), [], "is a directory"),
    ("train-file-symlink-loop", lambda d: _files_recipe(d, _loop), [], "cannot be opened"),
]


@pytest.mark.parametrize(("make", "extra", "says"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_bad_run_input_exits_2_naming_it_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             make: Callable[[Path], str], extra: list[str], says: str) -> None:
    runs = tmp_path / "runs"
    rc = main(["run", make(tmp_path), *extra, "--no-progress", "--runs-root", str(runs)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert says in err and "Traceback" not in err
    assert not runs.exists() or not any(runs.iterdir())


def test_an_unusable_runs_root_is_named_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rc = main(["run", _recipe(tmp_path), "--no-progress", "--runs-root", str(blocker / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and f"runs root {blocker / 'runs'}" in err and "--runs-root" in err, err


@pytest.mark.parametrize("option", ["--key", "--known-hosts"])
def test_cluster_add_with_a_missing_file_saves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], option: str) -> None:
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(tmp_path / "cfg"))
    rc = main(["cluster", "add", "c1", "localhost", option, str(tmp_path / "nonexistent")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{option} {tmp_path / 'nonexistent'}: no such file" in err, err
    assert not (tmp_path / "cfg" / "clusters.yaml").exists()


def test_a_whole_section_as_an_override_keeps_the_keys_it_does_not_name(tmp_path: Path) -> None:
    from clustertune.recipe.load import load_recipe

    r = load_recipe(_recipe(tmp_path), ["train={lr: 1}"])
    assert r.train.lr == 1 and r.train.max_steps == TINY_CAUSAL["train"]["max_steps"]
