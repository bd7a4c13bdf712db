"""`clustertune validate` checks offline what it can on this machine: the paths a recipe names,
the sequence length against a local config.json, SLURM's time and memory formats. Each is a
typed error naming the key and the fix (exit 2), found in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from clustertune.cli.main import main
from clustertune.errors import RecipeError
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CAUSAL, with_


def validate(tmp_path: Path, recipe: dict, *overrides: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump(recipe, sort_keys=False))
    rc = main(["validate", str(f), *overrides])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_missing_and_wrong_kind_paths_are_named_all_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.txt").write_text("hello\n")
    (tmp_path / "not-a-model").mkdir()
    recipe = with_(TINY_CAUSAL, model={"config": None, "name_or_path": "./not-a-model", "tokenizer": "./no-tokenizer"},
                   data={"dataset": None, "train_files": ["ok.txt", "missing.txt", str(tmp_path)]})
    rc, text = validate(tmp_path, recipe, capsys=capsys)
    assert rc == 2
    assert "recipe has 4 problems" in text, text
    assert f"data.train_files.1: file 'missing.txt' does not exist (relative paths start at {tmp_path})" in text
    assert f"data.train_files.2: '{tmp_path}' is not a regular file" in text
    assert "model.name_or_path: directory './not-a-model' has no config.json" in text
    assert "model.tokenizer: directory './no-tokenizer' does not exist" in text
    assert "ok.txt" not in text.split("data.train_files.1")[0]  # the file that exists is not named
    assert "Traceback" not in text


def test_dataset_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw").mkdir()
    rc, text = validate(tmp_path, with_(TINY_CAUSAL, data={"dataset": "./raw"}), capsys=capsys)
    assert rc == 2 and "data.dataset: directory './raw' was not written by datasets' save_to_disk" in text
    rc, text = validate(tmp_path, with_(TINY_CAUSAL, data={"dataset": "./gone"}), capsys=capsys)
    assert rc == 2 and "data.dataset: directory './gone' does not exist" in text
    rc, text = validate(tmp_path, with_(TINY_CAUSAL, data={"dataset": "wikitext"}), capsys=capsys)
    assert rc == 0, text  # a hub name: left to `clustertune run`


def test_block_size_against_a_local_config_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 64, "n_embd": 64}))
    pretrained = with_(TINY_CAUSAL, model={"config": None, "name_or_path": str(model), "tokenizer": str(model)},
                       data={"block_size": 128})
    rc, text = validate(tmp_path, pretrained, capsys=capsys)
    assert rc == 2
    assert (f"data.block_size: 128 is longer than the 64 positions of the model's config "
            f"(model.name_or_path: {model}); set data.block_size<=64") in text, text
    assert "r.yaml:" in text  # names the file (and the line of the key)

    fresh = with_(TINY_CAUSAL, model={"config": str(model / "config.json")})
    rc, text = validate(tmp_path, fresh, "data.block_size=65", capsys=capsys)
    assert rc == 2 and "<override data.block_size=65>" in text
    assert "or raise the positions with model.config_overrides" in text
    rc, text = validate(tmp_path, fresh, "data.block_size=128", "model.config_overrides.n_positions=128", capsys=capsys)
    assert rc == 0, text

    # A model type built fresh: its positions are known offline only from config_overrides.
    rc, text = validate(tmp_path, TINY_CAUSAL, "data.block_size=96", capsys=capsys)
    assert rc == 2 and "data.block_size: 96 is longer than the 64 positions of model.config_overrides" in text
    rc, text = validate(tmp_path, TINY_CAUSAL, capsys=capsys)
    assert rc == 0 and text.startswith("ok: "), text


@pytest.mark.parametrize("value", ["90", "10:00", "04:00:00", "1:00:00", "2-00", "2-00:00", "2-00:00:00", "UNLIMITED", "infinite"])
def test_slurm_time_limits_sbatch_accepts(value: str) -> None:
    r = load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm"}), [f"launch.time={value}"])
    assert r.launch.time == value


@pytest.mark.parametrize("value", ["4h", "90m", "1:2:3:4", "10:00.5", "1 day"])
def test_slurm_time_limits_sbatch_refuses(value: str) -> None:
    with pytest.raises(RecipeError, match=r"launch.time: .* is not a SLURM time limit; write minutes \(90\), HH:MM:SS"):
        load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm"}), [f"launch.time={value}"])


@pytest.mark.parametrize("value,ok", [("64G", True), ("64GB", True), ("500m", True), ("0", True), ("1T", True),
                                      ("1.5G", False), ("64GiB", False), ("64P", False), ("lots", False)])
def test_slurm_memory_sizes(value: str, ok: bool) -> None:
    recipe = with_(TINY_CAUSAL, launch={"backend": "slurm", "mem": value})
    if ok:
        assert load_recipe(recipe).launch.mem == value
    else:
        with pytest.raises(RecipeError, match=r"launch.mem: .* is not a SLURM memory size; write a whole number"):
            load_recipe(recipe)


def test_a_time_limit_in_a_yaml_file_stays_text(tmp_path: Path) -> None:
    """YAML 1.1 reads 1:00:00 as the base-60 number 3600; a recipe keeps what was written."""
    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump(with_(TINY_CAUSAL, launch={"backend": "slurm"})) + "")
    text = f.read_text().replace("backend: slurm", "backend: slurm\n  time: 1:00:00")
    f.write_text(text)
    assert load_recipe(f).launch.time == "1:00:00"


def test_a_cross_field_message_with_a_semicolon_stays_whole() -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "gpus_per_node": 2, "gres": "gpu:2"}))
    assert len(err.value.problems) == 1
    (p,) = err.value.problems
    assert p.key == "launch.gres" and p.message.endswith("; keep the one your site uses"), p


def test_model_revision_with_a_local_folder_is_a_typed_error_naming_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A hub revision applies to a hub name: beside a model read from a local folder (written
    bare, as transformers takes it), or given a local folder itself, it is refused naming
    model.revision and what it takes, not a traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "distgpt2").mkdir()
    (tmp_path / "distgpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 64}))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "main").mkdir()  # a folder that shares a branch's name is no model: not taken for one
    pretrained = with_(TINY_CAUSAL, model={"config": None, "name_or_path": "distgpt2", "tokenizer": "train",
                                           "config_overrides": {}})
    for verb in ("validate", "run"):
        f = tmp_path / "r.yaml"
        f.write_text(yaml.safe_dump(pretrained))
        rc = main([verb, str(f), "model.revision=main", *(["--no-progress"] if verb == "run" else [])])
        text = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in text, text
        assert (f"model.revision: 'main' is a hub revision, but model.name_or_path 'distgpt2' is the local folder "
                f"{tmp_path / 'distgpt2'}") in text, text
        assert "drop model.revision" in text
    hub = with_(pretrained, model={"name_or_path": "gpt2"})
    for revision in ("ckpt", "./ckpt"):
        rc, text = validate(tmp_path, hub, f"model.revision={revision}", capsys=capsys)
        assert rc == 2 and "Traceback" not in text, text
        assert (f"model.revision: {revision!r} is a local folder; model.revision takes a hub revision of the hub "
                "model in model.name_or_path (a branch such as main, a tag or a commit sha)") in text, text
    rc, text = validate(tmp_path, hub, "model.revision=main", capsys=capsys)
    assert rc == 0, text
    assert not (tmp_path / "runs").exists()
