"""Data semantics people bring from run_clm.py and the Runhouse seed, checked side by side with
the libraries those scripts use: ``datasets``' text loader, its percent slices and
``Dataset.shuffle(seed).select(range(n))``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clustertune.data.fingerprint import processing_identity, selection_identity
from clustertune.data.prepare import prepare_split
from clustertune.data.sources import load_raw
from clustertune.models.tokenizer import train_bpe
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CAUSAL, TINY_CLS, with_

CODE = 'def f(x):\n    return x + 1\n\n\n# poem\nroses are red\r\n  violets\tare blue\n\nlast line without a break'


def files_recipe(tmp_path: Path, n_lines: int | None = None, **data):
    f = tmp_path / "train.txt"
    f.write_text(CODE if n_lines is None else "".join(f"line {i}\n" for i in range(n_lines)), newline="")
    return f, load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(f)], **data}))


def test_txt_lines_keep_their_line_breaks_as_the_datasets_text_loader_does(tmp_path: Path) -> None:
    import datasets

    f, r = files_recipe(tmp_path, validation_files=[str(tmp_path / "train.txt")])
    theirs = datasets.load_dataset("text", data_files=str(f), keep_linebreaks=True, split="train")["text"]
    ours = load_raw(r.data, 0)
    assert ours.train["text"] == theirs and ours.validation["text"] == theirs
    assert "".join(theirs) == f.read_text()  # nothing lost: indentation, blank lines, breaks
    # The switch gives the old reading: non-blank lines, bare.
    off = load_recipe(with_(r.to_plain(), data={"keep_linebreaks": False}))
    assert load_raw(off.data, 0).train["text"] == [ln for ln in CODE.splitlines() if ln.strip()]
    assert processing_identity(r) != processing_identity(off)  # different bytes, different entry


def test_first_percent_validation_matches_the_train_slice_and_ignores_the_training_seed(tmp_path: Path) -> None:
    import datasets

    f, r = files_recipe(tmp_path, n_lines=200, validation_carve="first", validation_fraction=0.05)
    raw = load_raw(r.data, 0)
    assert raw.validation["text"] == datasets.load_dataset("text", data_files=str(f), keep_linebreaks=True, split="train[:5%]")["text"]
    assert raw.train["text"] == datasets.load_dataset("text", data_files=str(f), keep_linebreaks=True, split="train[5%:]")["text"]
    # The random carve-out moves with data.split_seed, never with train.seed.
    _, rnd = files_recipe(tmp_path, n_lines=200)
    other_train_seed = load_recipe(with_(rnd.to_plain(), train={"seed": 7}))
    other_split_seed = load_recipe(with_(rnd.to_plain(), data={"split_seed": 7}))
    val = load_raw(rnd.data, 0).validation["text"]
    assert load_raw(other_train_seed.data, 0).validation["text"] == val
    assert load_raw(other_split_seed.data, 0).validation["text"] != val
    assert selection_identity(rnd, True) == selection_identity(other_train_seed, True)
    assert selection_identity(rnd, True) != selection_identity(other_split_seed, True)


def test_shuffled_sample_selection_picks_what_shuffle_select_picks_on_sorted_labels() -> None:
    from datasets import Dataset

    # Sorted by label: the first 8 rows are all class 0.
    rows = {"text": [f"example number {i} of class {i // 20}" for i in range(40)], "label": [i // 20 for i in range(40)]}
    ds = Dataset.from_dict(rows)
    tok = train_bpe(rows["text"] * 3, 300, classification=True, model_max_length=16)
    first = load_recipe(TINY_CLS, ["data.max_length=16", "data.max_train_samples=8"])
    assert prepare_split(first, ds, tok, "train").labels.tolist() == [0] * 8
    shuffled = load_recipe(TINY_CLS, ["data.max_length=16", "data.max_train_samples=8",
                                      "data.sample_selection=shuffled", "data.sample_seed=42"])
    arr = prepare_split(shuffled, ds, tok, "train")
    theirs = ds.shuffle(seed=42).select(range(8))
    assert arr.labels.tolist() == theirs["label"]
    assert set(arr.labels.tolist()) == {0, 1}
    expected_first = prepare_split(first, Dataset.from_dict(theirs[:1]), tok, "train").input_ids[0]
    assert np.array_equal(arr.input_ids[0], expected_first)
    assert processing_identity(first) != processing_identity(shuffled)
