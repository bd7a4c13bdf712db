"""Data sources, block packing, classification encoding and the sharded, resumable order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clustertune.data import builtin
from clustertune.data.loader import Position, TrainBatches, epoch_order, to_batch
from clustertune.data.labels import infer_labels
from clustertune.data.prepare import Arrays, causal_lm_arrays, prepare_split
from clustertune.data.sources import carve_validation, load_raw
from clustertune.errors import DataError
from clustertune.models.tokenizer import train_bpe
from clustertune.recipe import load_recipe
from tests.helpers import TINY_CAUSAL, TINY_CLS, with_


class _IdsTokenizer:
    """A slow tokenizer whose texts are their ids ("1 2 3" -> [1, 2, 3]), ``vocab`` ids in all."""

    is_fast = False

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def __len__(self) -> int:
        return self.vocab

    def __call__(self, texts: list[str], **_: object) -> dict[str, list[list[int]]]:
        return {"input_ids": [[int(w) for w in t.split()] for t in texts]}


def test_causal_blocks_have_one_global_remainder() -> None:
    texts = ["1 2 3", "4 5", "6 7 8 9 10", "11"]
    blocks = causal_lm_arrays(texts, _IdsTokenizer(100), 4, None, "train").input_ids
    assert blocks.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]  # 9, 10, 11 dropped once, at the end
    # Splitting the same token stream differently gives the same blocks (no per-batch remainders).
    again = causal_lm_arrays(["1 2 3 4 5 6", "7 8 9 10 11"], _IdsTokenizer(100), 4, None, "train").input_ids
    assert again.tolist() == blocks.tolist()
    assert blocks.dtype == np.uint16
    assert causal_lm_arrays(texts, _IdsTokenizer(70_000), 4, None, "train").input_ids.dtype == np.int32


def test_causal_batches_use_inputs_as_labels() -> None:
    import torch

    arr = Arrays(input_ids=np.arange(12, dtype=np.uint16).reshape(3, 4))
    b = to_batch(arr, np.array([2, 0]), torch.device("cpu"))
    assert b["input_ids"].tolist() == [[8, 9, 10, 11], [0, 1, 2, 3]]
    assert b["labels"].tolist() == b["input_ids"].tolist()
    assert b["input_ids"].dtype == torch.int64


def test_builtin_corpora() -> None:
    paras = builtin.pydoc_paragraphs()
    assert len(paras) > 1000 and all(p.strip() for p in paras)
    rows = builtin.pydoc_kinds()
    labels = [r["label"] for r in rows]
    assert labels.count(0) == labels.count(1) > 300  # balanced: majority baseline is 0.5
    assert all(not str(r["text"]).startswith(" ") for r in rows)  # indentation gives nothing away
    assert builtin.pydoc_kinds() == rows  # deterministic


def write_files(tmp_path: Path) -> dict[str, Path]:
    import pandas as pd

    rows = [{"text": f"example number {i} " * 3, "label": i % 3} for i in range(30)]
    out = {}
    out["txt"] = tmp_path / "d.txt"
    out["txt"].write_text("\n".join(r["text"] for r in rows) + "\n\n")
    out["jsonl"] = tmp_path / "d.jsonl"
    out["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    out["json"] = tmp_path / "d.json"
    out["json"].write_text(json.dumps(rows))
    out["csv"] = tmp_path / "d.csv"
    pd.DataFrame(rows).to_csv(out["csv"], index=False)
    out["parquet"] = tmp_path / "d.parquet"
    pd.DataFrame(rows).to_parquet(out["parquet"])
    return out


@pytest.mark.parametrize("kind", ["txt", "jsonl", "json", "csv", "parquet"])
def test_local_files_every_format(tmp_path: Path, kind: str) -> None:
    f = write_files(tmp_path)[kind]
    r = load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(f)]}))
    raw = load_raw(r.data, seed=1)
    # .txt keeps the trailing blank line as an example of its own, as datasets' text loader does.
    assert len(raw.train) + len(raw.validation) == (31 if kind == "txt" else 30) and raw.carved
    assert raw.identity["kind"] == "files" and len(raw.identity["train"][0]["sha256"]) == 64
    if kind != "txt":
        assert sorted(raw.train.column_names) == ["label", "text"]


def test_validation_files_are_used_not_carved(tmp_path: Path) -> None:
    f = write_files(tmp_path)
    r = load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(f["csv"])],
                                             "validation_files": [str(f["jsonl"])]}))
    raw = load_raw(r.data, seed=1)
    assert (len(raw.train), len(raw.validation), raw.carved) == (30, 30, False)


def test_save_to_disk_directory(tmp_path: Path) -> None:
    from datasets import Dataset, DatasetDict

    dd = DatasetDict({"train": Dataset.from_dict({"text": [f"t {i}" for i in range(20)]}),
                      "validation": Dataset.from_dict({"text": ["v 1", "v 2"]})})
    dd.save_to_disk(str(tmp_path / "ds"))
    raw = load_raw(load_recipe(TINY_CAUSAL, [f"data.dataset={tmp_path / 'ds'}"]).data, seed=0)
    assert (len(raw.train), len(raw.validation), raw.identity["kind"]) == (20, 2, "disk")
    with pytest.raises(DataError, match="split 'nope' not found; the dataset has train, validation"):
        load_raw(load_recipe(TINY_CAUSAL, [f"data.dataset={tmp_path / 'ds'}", "data.train_split=nope"]).data, 0)


def test_carve_is_seeded_and_disjoint() -> None:
    from datasets import Dataset

    ds = Dataset.from_dict({"text": [str(i) for i in range(100)]})
    tr, va = carve_validation(ds, 0.1, seed=3)
    tr2, va2 = carve_validation(ds, 0.1, seed=3)
    _, va3 = carve_validation(ds, 0.1, seed=4)
    assert len(va) == 10 and va["text"] == va2["text"] and va["text"] != va3["text"]
    assert not set(tr["text"]) & set(va["text"]) and len(tr) + len(va) == 100
    assert tr["text"] == tr2["text"]


def test_missing_file_and_column_errors(tmp_path: Path) -> None:
    f = write_files(tmp_path)
    with pytest.raises(DataError, match=r"data.train_files: file '.*nope.csv' does not exist"):
        load_raw(load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(tmp_path / "nope.csv")]})).data, 0)
    with pytest.raises(DataError, match="data.text_column: column 'body' not in the train data; its columns are text, label"):
        load_raw(load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(f["csv"])], "text_column": "body"})).data, 0)
    with pytest.raises(DataError, match="unsupported extension .xml"):
        (tmp_path / "a.xml").write_text("<a/>")
        load_raw(load_recipe(with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(tmp_path / "a.xml")]})).data, 0)
    with pytest.raises(DataError, match="unknown builtin corpus 'builtin:nope'"):
        load_raw(load_recipe(TINY_CAUSAL, ["data.dataset=builtin:nope"]).data, 0)
    with pytest.raises(DataError, match="looks like a path but does not exist"):
        load_raw(load_recipe(TINY_CAUSAL, ["data.dataset=./no/such/dir"]).data, 0)


def test_hub_dataset_offline_says_how_to_fix() -> None:
    r = load_recipe("gpt2-wikitext2")
    with pytest.raises(DataError) as ei:
        load_raw(r.data, 0)
    msg = str(ei.value)
    assert "cannot load 'wikitext' (wikitext-2-raw-v1) from the Hugging Face Hub" in msg
    assert "HF_HUB_OFFLINE=1" in msg and "save_to_disk" in msg


def test_labels_checked_against_num_labels(tmp_path: Path) -> None:
    f = write_files(tmp_path)["jsonl"]  # labels 0, 1, 2
    r = load_recipe(with_(TINY_CLS, data={"dataset": None, "train_files": [str(f)]}))  # num_labels 2
    raw = load_raw(r.data, 0)
    with pytest.raises(DataError, match=r"has label 2, outside 0..1 .* below model.num_labels=2"):
        infer_labels(r, {"train": raw.train})
    r2 = load_recipe(with_(TINY_CLS, data={"dataset": None, "train_files": [str(f)], "label_column": "stars"}))
    with pytest.raises(DataError, match="data.label_column: column 'stars' not in the train data"):
        infer_labels(r2, {"train": load_raw(r2.data, 0).train})


def test_classification_arrays_pad_truncate_and_frame() -> None:
    from datasets import Dataset

    r = load_recipe(TINY_CLS, ["data.max_length=8", "data.max_train_samples=2"])
    tok = train_bpe(["short text", "a much longer text that will not fit in eight tokens at all"] * 20, 300,
                    classification=True, model_max_length=8)
    ds = Dataset.from_dict({"text": ["short text", "a much longer text that will not fit in eight tokens", "x"], "label": [0, 1, 1]})
    arr = prepare_split(r, ds, tok, "train")
    assert arr.input_ids.shape == (2, 8) and arr.labels.tolist() == [0, 1]  # sample limit applied
    assert arr.attention_mask[1].sum() == 8 and 0 < arr.attention_mask[0].sum() < 8  # truncated / padded
    assert arr.input_ids[0, 0] == tok.cls_token_id
    assert arr.input_ids[0, arr.attention_mask[0].sum() - 1] == tok.sep_token_id
    assert (arr.input_ids[0, arr.attention_mask[0].sum():] == tok.pad_token_id).all()


def test_order_is_the_same_for_any_world_size_and_resumes_exactly() -> None:
    arr = Arrays(input_ids=np.arange(40 * 2).reshape(40, 2))
    one = TrainBatches(arr, micro_batch=4, accum=2, rank=0, world=1, seed=7, shuffle=True)
    two = [TrainBatches(arr, micro_batch=2, accum=2, rank=r, world=2, seed=7, shuffle=True) for r in range(2)]
    pos1, pos2 = Position(), Position()
    for _ in range(12):  # more than one epoch (5 steps per epoch)
        m1, pos1 = one.step_indices(pos1)
        parts = [b.step_indices(pos2) for b in two]
        pos2 = parts[0][1]
        global_one = np.concatenate(m1)
        global_two = np.concatenate([np.concatenate(p[0]) for p in parts])
        assert sorted(global_one.tolist()) == sorted(global_two.tolist())
        # strided shards: rank r holds samples r, r+W, ... of the global batch
        order = np.concatenate(parts[0][0]).tolist()
        assert set(order).isdisjoint(np.concatenate(parts[1][0]).tolist())
    assert pos1.to_dict() == pos2.to_dict() == {"epoch": 2, "offset": 16, "samples_seen": 96}
    # Restarting from a saved position continues with the very next samples.
    fresh = TrainBatches(arr, micro_batch=4, accum=2, rank=0, world=1, seed=7, shuffle=True)
    a, _ = one.step_indices(pos1)
    b, _ = fresh.step_indices(Position.from_dict(pos1.to_dict()))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert not np.array_equal(epoch_order(40, 7, 0, True), epoch_order(40, 7, 1, True))
    assert epoch_order(5, 7, 0, False).tolist() == [0, 1, 2, 3, 4]


def test_too_little_data_for_one_batch() -> None:
    with pytest.raises(DataError, match="fewer than one global batch of 64"):
        TrainBatches(Arrays(input_ids=np.zeros((10, 4))), 32, 2, 0, 1, 0, True)
