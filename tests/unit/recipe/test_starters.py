"""`clustertune init`: every starter runs offline as written, and its comments are true of it."""

from __future__ import annotations

import re

import pytest
import yaml

from clustertune.data.builtin import KIND_LABELS
from clustertune.recipe.load import shipped_recipes
from clustertune.recipe.starters import STARTERS, starter_text


def test_every_starter_starts_from_a_model_that_needs_no_hub() -> None:
    """A model built from a config, or a shipped recipe's run (`run` trains it first when missing)."""
    for task in STARTERS:
        recipe = yaml.safe_load(starter_text(task))
        base = (recipe.get("rl") or {}).get("policy") or (recipe.get("model") or {}).get("name_or_path")
        if base is None:
            assert recipe["model"]["config"] and recipe["model"]["tokenizer"] == "train", task
        else:
            assert base.startswith("run:") and base.removeprefix("run:") in shipped_recipes(), (task, base)


def _comment_blocks(text: str) -> list[str]:
    """Runs of comment lines; a key, commented out (``# key: value``) or not, ends one."""
    blocks, block = [], []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("# ") and not re.match(r"\s*# [a-z_]+: ", line):
            block.append(line.strip())
        elif block:
            blocks.append("\n".join(block))
            block = []
    return blocks


def test_a_key_shown_twice_is_documented_once() -> None:
    """An alternative value right below a key (commented out) shares the key's comment."""
    for task in STARTERS:
        blocks = _comment_blocks(starter_text(task))
        assert len(blocks) == len(set(blocks)), (task, [b for b in blocks if blocks.count(b) > 1])


def test_the_classification_starter_has_the_classes_of_its_data() -> None:
    text = starter_text("classification")
    assert yaml.safe_load(text)["model"]["num_labels"] == len(KIND_LABELS)
    assert f"{len(KIND_LABELS)} classes" in text and "3 classes" not in text


@pytest.mark.parametrize("task", ["sft", "classification"])
def test_the_max_length_comment_fits_the_task(task: str) -> None:
    lines = starter_text(task).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("max_length:"))
    assert "classification and SFT" in lines[at - 1] and not lines[at - 1].strip().startswith("# Classification:")
