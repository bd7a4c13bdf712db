"""A bad row is named where the user finds it: the file and its line (JSON lines, CSV), whatever
row of the train or validation split the carve made of it. Classification labels and KTO's
desirable flags, like SFT's conversations."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clustertune.data.sources import carve_indices
from clustertune.errors import DataError
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CLS, with_

N = 24
BAD = 17  # the bad row's 0-based position among the file's rows


def _moved_by_the_carve(fraction: float, seed: int) -> int:
    """The bad row's index in the split the carve put it in: not its place in the file."""
    keep, held = carve_indices(N, fraction, seed)
    split = keep if BAD in keep else held
    at = int(list(split).index(BAD))
    assert at != BAD
    return at


def _cls_recipe(files: list[Path], **data: Any) -> Any:
    return load_recipe(with_(TINY_CLS, data={"dataset": None, "train_files": [str(f) for f in files],
                                             "validation_fraction": 0.25, **data}))


def _labels(recipe: Any) -> Any:
    """The recipe's data prepared as a run prepares it (the labels are read after the carve)."""
    from clustertune.data.cache import prepare

    return prepare(recipe)


def test_a_bad_label_in_json_lines_names_its_file_and_line(tmp_path: Path) -> None:
    moved = _moved_by_the_carve(0.25, 0)
    first = tmp_path / "first.jsonl"  # a second file before it: the line is counted in its own file
    first.write_text("".join(json.dumps({"text": f"f{i}", "label": 0}) + "\n" for i in range(3)))
    rows = [{"text": f"t{i}", "label": i % 2} for i in range(N - 3)]
    rows[BAD - 3]["label"] = 7
    second = tmp_path / "second.jsonl"
    second.write_text("\n".join(json.dumps(r) for r in rows[:5]) + "\n\n" + "".join(json.dumps(r) + "\n" for r in rows[5:]))
    with pytest.raises(DataError) as err:
        _labels(_cls_recipe([first, second], split_seed=0))
    text = str(err.value)
    # Row BAD - 3 of the second file is its line BAD - 3 + 2 (1-based, after one blank line).
    assert re.search(rf"data.label_column: '{re.escape(str(second))}' line {BAD - 3 + 2} \((train|validation)\) has "
                     r"label 7, outside 0..1", text), text
    assert f"row {moved}" not in text and f"row {BAD}" not in text


def test_a_bad_label_in_a_csv_file_names_its_line_counting_the_header_and_quoted_lines(tmp_path: Path) -> None:
    moved = _moved_by_the_carve(0.25, 1)
    lines = ["text,label"] + [f"t{i},{'ab'[i % 2]}" for i in range(N)]
    lines[1] = '"two\nlines",a'  # a value over two lines: every later row starts one line further down
    lines[1 + BAD] = f"t{BAD},z"
    path = tmp_path / "train.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        _labels(_cls_recipe([path], split_seed=1, label_names=["a", "b"]))
    text = str(err.value)
    assert re.search(rf"'{re.escape(str(path))}' line {BAD + 3} \((train|validation)\) has label 'z', which is not "
                     "one of data.label_names", text), text
    assert f"row {moved}" not in text


def test_a_kto_flag_that_is_not_true_or_false_names_its_file_and_line(tmp_path: Path) -> None:
    """The prompts left empty are dropped and the rest carved: the line is still the file's."""
    from clustertune.recipe.rl_recipe import as_rl_recipe
    from clustertune.train.rl.sources import load_rl_data

    rows = [{"prompt": f"p{i}", "completion": f"c{i}", "label": ["false", "true"][i % 2]} for i in range(N)]
    rows[2]["prompt"] = "  "  # dropped before the check: the rows after it move up one
    rows[BAD]["label"] = "maybe"
    path = tmp_path / "thumbs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = as_rl_recipe(load_recipe({
        "name": "k", "task": "rlhf", "data": {"train_files": [str(path)], "validation_fraction": 0.25},
        "train": {"batch_size": 4, "max_steps": 2}, "rl": {"algorithm": "kto", "policy": "run:somewhere"}}))
    with pytest.raises(DataError) as err:
        load_rl_data(recipe)
    text = str(err.value)
    assert re.search(rf"rl.label_column: '{re.escape(str(path))}' line {BAD + 1} \((train|validation)\) has 'maybe' "
                     "in column 'label'", text), text
    assert "row" not in text.split("KTO needs")[0]
