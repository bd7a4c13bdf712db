"""Class labels as run_glue.py reads them: integers as ids, ClassLabel names, strings sorted
(or in data.label_names' order), and every bad label named with its split and row."""

from __future__ import annotations

import pytest

from clustertune.data.labels import LabelSet, infer_labels, label_ids
from clustertune.errors import DataError, RecipeError
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CLS, with_


def _recipe(**data: object) -> object:
    return load_recipe(with_(TINY_CLS, model={"num_labels": None}, data=data))


def _ds(labels: list[object], column: str = "label") -> object:
    from datasets import Dataset

    return Dataset.from_dict({"text": [f"t{i}" for i in range(len(labels))], column: labels})


def test_string_labels_get_ids_in_sorted_order_and_the_count_is_inferred() -> None:
    labels = infer_labels(_recipe(), {"train": _ds(["pos", "neg", "neutral", "pos"]), "validation": _ds(["neg"])})
    assert labels == LabelSet(3, ("neg", "neutral", "pos"))
    assert label_ids(labels, ["pos", "neg", "neutral"]).tolist() == [2, 0, 1]
    assert labels.id2label == {0: "neg", 1: "neutral", 2: "pos"}
    assert LabelSet.from_json(labels.to_json()) == labels


def test_label_names_fix_the_order_and_integers_are_ids() -> None:
    named = infer_labels(_recipe(label_names=["pos", "neg"]), {"train": _ds(["neg", "pos"])})
    assert named.names == ("pos", "neg") and label_ids(named, ["neg"]).tolist() == [1]
    ints = infer_labels(_recipe(), {"train": _ds([0, 3, 1]), "validation": _ds([2])})
    assert ints == LabelSet(4, None) and label_ids(ints, [3, 0]).tolist() == [3, 0]


def test_a_class_label_column_gives_its_names() -> None:
    from datasets import ClassLabel, Dataset, Features, Value

    feats = Features({"text": Value("string"), "label": ClassLabel(names=["no", "yes", "maybe"])})
    ds = Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]}, features=feats)
    assert infer_labels(_recipe(), {"train": ds}) == LabelSet(3, ("no", "yes", "maybe"))


@pytest.mark.parametrize("splits,needle", [
    ({"train": _ds(["a", "b"]), "validation": _ds(["a", "c"])},
     r"validation row 1 has label 'c', which is not one of the train labels \('a', 'b'\)"),
    ({"train": _ds([1, 0]), "validation": _ds(["b"])}, r"train row 0 has label 1 \(int\); labels must be all integers .* or all strings"),
    ({"train": _ds([0.5, 1.0])}, r"train row 0 has label 0.5 \(float\)"),
    ({"train": _ds(["only", "only"])}, "a single label 'only'; classification needs two or more classes"),
    ({"train": _ds([0, -1])}, r"train row 1 has label -1, outside 0..1 .* integers from 0"),
    ({"train": _ds(["a", "b"], column="stars")}, "data.label_column: column 'label' not in the train data; its columns are text, stars"),
], ids=["unseen-name", "mixed", "float", "one-class", "negative", "no-column"])
def test_bad_labels_are_named_with_split_and_row(splits: dict, needle: str) -> None:
    with pytest.raises(DataError, match=needle):
        infer_labels(_recipe(), splits)


def test_label_settings_that_contradict_are_refused() -> None:
    with pytest.raises(DataError, match=r"model.num_labels: 3, but the data has 2 label names"):
        infer_labels(load_recipe(with_(TINY_CLS, model={"num_labels": 3})), {"train": _ds(["a", "b"])})
    with pytest.raises(RecipeError, match="model.num_labels: 2 contradicts data.label_names"):
        load_recipe(with_(TINY_CLS, data={"label_names": ["a", "b", "c"]}))
    with pytest.raises(RecipeError, match="data.label_names: needs two or more distinct names"):
        _recipe(label_names=["a", "a"])


def test_the_label_rule_and_names_are_part_of_the_fingerprint() -> None:
    from clustertune.data.fingerprint import selection_identity

    plain, named = _recipe(), _recipe(label_names=["b", "a"])
    assert selection_identity(plain, True)["labels"]["rule"]
    assert selection_identity(plain, True) != selection_identity(named, True)


def test_only_the_rows_kept_need_known_labels() -> None:
    from clustertune.data.prepare import prepare_split
    from clustertune.models.tokenizer import train_bpe

    ds = _ds(["b", "a", "a", "zzz"])  # the last row is past data.max_train_samples
    tok = train_bpe(["t0 t1 t2 t3"] * 20, 300, classification=True, model_max_length=8)
    r = _recipe(max_train_samples=3, max_length=8)
    assert prepare_split(r, ds, tok, "train").labels.tolist() == [1, 0, 0]
