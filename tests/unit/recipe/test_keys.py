"""The schema's own documentation: every key with type, default and doc; the JSON Schema file for
editors, kept in sync with the code; the Trainer names did-you-mean knows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clustertune.errors import RecipeError, UnknownKey
from clustertune.recipe.keys import all_keys, keys_under, recipe_json_schema
from clustertune.recipe.load import load_recipe, recipes_dir
from clustertune.recipe.trainer_names import TRAINER_NAMES
from tests.helpers import TINY_CAUSAL


def test_every_key_has_a_doc_and_its_default_is_what_a_recipe_gets() -> None:
    docs = all_keys()
    assert [d.key for d in docs if not d.doc] == []  # a new field without a docstring fails here
    resolved = load_recipe(TINY_CAUSAL).to_plain()
    checked = 0
    for d in docs:
        section, _, rest = d.key.partition(".")
        if d.section or "[]" in d.key or section not in ("train", "launch", "tracking") or rest in TINY_CAUSAL.get(section, {}):
            continue
        node: Any = resolved
        for part in d.key.split("."):
            node = node[part]
        assert node == d.default, d.key
        checked += 1
    assert checked > 60
    lr = next(d for d in docs if d.key == "train.lr")
    assert (lr.type, lr.default, lr.doc) == ("float (> 0.0)", 5e-05, "Peak learning rate.")


def test_a_section_narrows_to_its_keys_and_an_unknown_key_names_the_closest() -> None:
    sft = [d.key for d in keys_under("data.sft")]
    assert sft[0] == "data.sft" and "data.sft.packing" in sft and all(k.startswith("data.sft") for k in sft)
    assert [d.key for d in keys_under("rl.rewards")][:2] == ["rl.rewards", "rl.rewards[].function"]
    with pytest.raises(UnknownKey, match=r"no recipe key 'train.bach_size'; did you mean 'train.batch_size'"):
        keys_under("train.bach_size")
    with pytest.raises(UnknownKey, match=r"did you mean 'train.epochs'\? \(num_train_epochs in Trainer terms"):
        keys_under("num_train_epochs")


def _properties(schema: dict[str, Any], node: dict[str, Any], prefix: str, out: dict[str, str]) -> None:
    for name, prop in node.get("properties", {}).items():
        key = f"{prefix}{name}"
        out[key] = prop.get("description", "")
        refs = [prop] + prop.get("anyOf", []) + ([prop["items"]] if "items" in prop else [])
        for ref in (r["$ref"] for r in refs if "$ref" in r):
            sub = schema["$defs"][ref.rsplit("/", 1)[-1]]
            _properties(schema, sub, f"{key}[]." if prop.get("type") == "array" else f"{key}.", out)


def test_the_json_schema_for_editors_has_every_key_and_doc_and_the_shipped_file_is_current() -> None:
    schema = recipe_json_schema()
    described: dict[str, str] = {}
    _properties(schema, schema, "", described)
    assert {d.key: d.doc for d in all_keys()} == described
    assert schema["additionalProperties"] is False  # editors flag unknown keys, as validate does
    shipped = recipes_dir() / "recipe.schema.json"
    text = json.dumps(schema, indent=2) + "\n"
    before = shipped.read_text(encoding="utf-8")
    if before != text and os.environ.get("CLUSTERTUNE_UPDATE_GOLDEN") == "1":
        shipped.write_text(text, encoding="utf-8")  # written, and still a failure: run again to compare
        pytest.fail(f"{shipped} updated; review the diff and run again without CLUSTERTUNE_UPDATE_GOLDEN")
    assert before == text, (
        f"{shipped} is out of date: regenerate it with CLUSTERTUNE_UPDATE_GOLDEN=1 "
        "(or `clustertune schema --json-schema > recipes/recipe.schema.json`)")


@pytest.mark.parametrize("name", sorted(TRAINER_NAMES))
def test_a_trainer_name_anywhere_gets_the_recipe_key_it_maps_to(name: str) -> None:
    target = TRAINER_NAMES[name][0]
    assert keys_under(target)[0].key == target  # every mapping names a real key
    section = "train" if not target.startswith("train.") else "data"  # a section where the name is unknown
    if name in {k.rsplit(".", 1)[-1] for k in (d.key for d in all_keys()) if k.startswith(f"{section}.")}:
        section = "tracking"
    with pytest.raises(RecipeError) as err:
        load_recipe(TINY_CAUSAL, [f"{section}.{name}=1"])
    assert f"{section}.{name}: unknown key (did you mean '{target}'? ({name} in Trainer terms" in str(err.value)


def test_trainer_names_in_a_recipe_file_are_named_with_their_line(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("task: causal_lm\nlearning_rate: 0.001\ntrain:\n  per_device_train_batch_size: 4\n")
    with pytest.raises(RecipeError) as err:
        load_recipe(p)
    text = str(err.value)
    assert f"{p}:2: learning_rate: unknown key (did you mean 'train.lr'?" in text
    assert f"{p}:4: train.per_device_train_batch_size: unknown key (did you mean 'train.batch_size'?" in text
