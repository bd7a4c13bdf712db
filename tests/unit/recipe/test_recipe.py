"""Recipe schema, overrides and the errors users see."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from clustertune.errors import RecipeError, RecipeNotFound
from clustertune.recipe import dump_recipe, load_recipe, shipped_recipes
from clustertune.recipe.load import parse_scalar
from tests.helpers import TINY_CAUSAL, with_


def write(tmp_path: Path, text: str, name: str = "r.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_overrides_reach_nested_keys_and_parse_floats() -> None:
    r = load_recipe(TINY_CAUSAL, ["train.lr=3e-4", "model.config_overrides.n_layer=3",
                                  "model.config_overrides.resid_pdrop=1e-1", "data.train_split=train2"])
    assert r.train.lr == pytest.approx(3e-4)
    assert r.model.config_overrides["n_layer"] == 3
    assert r.model.config_overrides["resid_pdrop"] == pytest.approx(0.1)
    assert r.data.train_split == "train2"


@pytest.mark.parametrize("text,value", [("3e-4", 3e-4), ("1E5", 1e5), ("12", 12), ("true", True),
                                        ("null", None), ("[a, b]", ["a", "b"]), ("gpt2", "gpt2")])
def test_parse_scalar(text: str, value: object) -> None:
    assert parse_scalar(text) == value


def test_yaml_exponent_floats_are_floats(tmp_path: Path) -> None:
    p = write(tmp_path, "task: causal_lm\nmodel: {config: gpt2, tokenizer: train}\n"
                        "data: {dataset: 'builtin:pydoc'}\ntrain: {lr: 3e-4}\n")
    assert load_recipe(p).train.lr == pytest.approx(3e-4)


def test_unknown_key_has_did_you_mean_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  config: gpt2\n  tokenizer: train\ndata:\n  dataset: builtin:pydoc\n"
                        "train:\n  learning_rate: 0.1\n  bach_size: 4\n")
    with pytest.raises(RecipeError) as ei:
        load_recipe(p)
    text = str(ei.value)
    assert f"{p}:8: train.bach_size: unknown key (did you mean 'train.batch_size'?)" in text
    assert f"{p}:7: train.learning_rate: unknown key" in text
    assert len(ei.value.problems) == 2  # every problem at once


def test_unknown_top_level_section() -> None:
    with pytest.raises(RecipeError, match=r"trian: unknown key \(did you mean 'train'\?\)"):
        load_recipe(with_(TINY_CAUSAL, trian={"lr": 1}))


def test_wrong_type_and_out_of_range_reported_together() -> None:
    with pytest.raises(RecipeError) as ei:
        load_recipe(TINY_CAUSAL, ["train.lr=0", "train.batch_size=0", "train.max_steps=many", "data.block_size=-1"])
    keys = {p.key for p in ei.value.problems}
    assert keys == {"train.lr", "train.batch_size", "train.max_steps", "data.block_size"}
    msg = str(ei.value)
    assert "<override train.lr=0>: train.lr: Input should be greater than 0, got 0" in msg
    assert "got 'many'" in msg


def test_malformed_yaml_names_line_and_column(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  config: gpt2\n   tokenizer: [train\n")
    with pytest.raises(RecipeError) as ei:
        load_recipe(p)
    assert ei.value.problems[0].line is not None
    assert "malformed YAML at line 3, column" in str(ei.value)


def test_cross_field_checks() -> None:
    bad = with_(TINY_CAUSAL, model={"name_or_path": "gpt2"})  # both name_or_path and config
    with pytest.raises(RecipeError, match="set exactly one of model.name_or_path"):
        load_recipe(bad)
    # num_labels is inferred from the data when unset; label names are for classification only
    assert load_recipe(TINY_CAUSAL, ["task=sequence_classification"]).model.num_labels is None
    with pytest.raises(RecipeError, match="data.label_names: only for task sequence_classification"):
        load_recipe(TINY_CAUSAL, ["data.label_names=[a, b]"])
    with pytest.raises(RecipeError, match="set exactly one of data.dataset and data.train_files"):
        load_recipe(TINY_CAUSAL, ["data.dataset=null"])


def test_override_below_a_value_is_an_error() -> None:
    with pytest.raises(RecipeError, match=r"train.lr: is a value \(0.003\), so train.lr.x cannot be set below it"):
        load_recipe(TINY_CAUSAL, ["train.lr.x=1"])
    with pytest.raises(RecipeError, match="override must look like key=value"):
        load_recipe(TINY_CAUSAL, ["train.lr"])


def test_missing_recipe_lists_shipped_names(tmp_path: Path) -> None:
    with pytest.raises(RecipeNotFound) as ei:
        load_recipe("quickstrat")
    assert "Did you mean 'quickstart'?" in str(ei.value)
    for name in ("quickstart", "gpt2-wikitext2", "bert-yelp", "pydoc-kinds"):
        assert name in str(ei.value)
    with pytest.raises(RecipeNotFound, match="directory"):
        load_recipe(tmp_path)


def test_shipped_recipe_by_name_and_file_name() -> None:
    assert load_recipe("quickstart").name == "quickstart"
    assert load_recipe("quickstart.yaml").task == "causal_lm"


@pytest.mark.parametrize("name", sorted(shipped_recipes()))
def test_every_shipped_recipe_validates_and_round_trips(name: str, tmp_path: Path) -> None:
    r = load_recipe(name)
    again = load_recipe(write(tmp_path, dump_recipe(r)))
    assert again == r


def test_shipped_set_is_complete() -> None:
    assert {"quickstart", "gpt2-wikitext2", "bert-yelp", "pydoc-kinds"} <= set(shipped_recipes())


def test_every_field_is_documented() -> None:
    from clustertune.recipe.schema import DataSection, LaunchSection, ModelSection, Recipe, TrackingSection, TrainSection

    from clustertune.recipe.sft_schema import SFTSection

    for model in (Recipe, ModelSection, DataSection, TrainSection, LaunchSection, TrackingSection, SFTSection):
        undocumented = [n for n, f in model.model_fields.items() if not f.description]
        assert not undocumented, f"{model.__name__}: {undocumented}"


def test_recipe_is_frozen() -> None:
    r = load_recipe(TINY_CAUSAL)
    with pytest.raises(ValidationError):
        r.train.lr = 1.0  # type: ignore[misc]
