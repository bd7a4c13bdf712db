"""Data shapes behind one protocol: a shape added by a test is fingerprinted, built, cached and
opened by the cache without a line of the cache knowing it (the README's "Adding a data shape")."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clustertune.data import cache, shapes
from clustertune.data.manifest import MappedArrays
from clustertune.data.prepare import column
from clustertune.data.shapes.base import Built, BuildJob, write_arrays
from clustertune.recipe import load_recipe, task_traits
from tests.helpers import TINY_CAUSAL, with_


class FirstTokens:
    """A toy shape: one sample per example, its first ``data.block_size`` tokens, right-padded,
    no packing (every example keeps its own row)."""

    name = "first_tokens"
    reads_text_column = True
    classifier_tokens = False

    def selection(self, recipe: Any) -> dict[str, Any]:
        return {}

    def processing(self, recipe: Any) -> dict[str, Any]:
        return {"first_tokens": recipe.data.block_size}

    def tokenizer_inputs(self, recipe: Any, tokenizer: Callable[[], Any]) -> dict[str, Any]:
        return {}

    def build(self, job: BuildJob) -> Built:
        width, data, splits = job.recipe.data.block_size, job.raw(), {}
        t0 = time.perf_counter()
        for name, ds in (("train", data.train), ("validation", data.validation)):
            rows = [job.tokenizer(t)["input_ids"][:width] for t in column(ds, job.recipe.data.text_column)]
            ids = np.full((len(rows), width), job.tokenizer.pad_token_id, dtype=np.int32)
            for i, r in enumerate(rows):
                ids[i, :len(r)] = r
            arrays = write_arrays(job, name, {"input_ids": ids})
            splits[name] = {"examples": len(ds), "samples": len(rows), "tokens": sum(map(len, rows)), "arrays": arrays}
        return Built(splits, write_seconds=time.perf_counter() - t0)

    def load(self, arrays: dict[str, Any], spec: Any, directory: Path) -> MappedArrays:
        return MappedArrays(input_ids=arrays["input_ids"], n_tokens=spec.tokens)


def _recipe(tmp_path: Path) -> Any:
    return load_recipe(with_(TINY_CAUSAL, data={"block_size": 16, "max_eval_samples": None,
                                                "cache_dir": str(tmp_path / "cache")}))


def test_a_new_shape_is_built_cached_and_opened_by_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packed = cache.prepare(_recipe(tmp_path))  # the task's own shape first, for comparison
    monkeypatch.setitem(shapes.SHAPES, "first_tokens", FirstTokens())
    monkeypatch.setitem(task_traits.TASK_TRAITS, "causal_lm",
                        task_traits.TaskTraits(data="first_tokens", head="causal_lm"))  # type: ignore[arg-type]
    recipe = _recipe(tmp_path)
    ours = cache.prepare(recipe)
    assert not ours.hit and ours.fingerprint != packed.fingerprint  # its processing is its own identity
    assert ours.manifest.record.splits["train"].samples == ours.manifest.record.splits["train"].examples
    train = ours.open_split("train")
    assert isinstance(train, MappedArrays) and train.input_ids.shape[1] == 16
    tok = ours.tokenizer()
    first = column(cache._LazyRaw(recipe).get().train, "text")[0]
    want = tok(first)["input_ids"][:16]
    assert list(np.asarray(train.input_ids[0])[:len(want)]) == want  # the toy's rows, as the toy wrote them
    again = cache.prepare(recipe)
    assert again.hit and again.fingerprint == ours.fingerprint
    assert len(packed.open_split("train")) != len(train)  # the packed entry is still the packed shape's


def test_the_cache_names_no_shape() -> None:
    """Only the shapes say what a shape means; the cache asks the recipe's shape."""
    text = Path(cache.__file__).read_text(encoding="utf-8")
    for word in ("packed", "labelled", "templated", "chats", "loss_mask", "label_column", "chat_template"):
        assert word not in text, word


def test_a_task_that_prepares_nothing_has_no_shape() -> None:
    from clustertune.errors import DataError

    rl = load_recipe("recipes/rlhf-grpo-offline.yaml")
    with pytest.raises(DataError, match="prepares no data"):
        shapes.shape_of(rl)


def test_a_pair_batch_holds_both_texts_cut_to_the_longest_and_counts_their_real_tokens() -> None:
    """Pairs batch as (pairs, 2, width); tokens/s and the attention term of the flops count the
    rows' real tokens and length, not the pair axis."""
    import torch

    from clustertune.data.loader import TrainBatches, to_batch
    from clustertune.data.shapes.pairs import PairArrays

    ids = np.arange(3 * 2 * 8, dtype=np.int32).reshape(3, 2, 8)
    mask = np.zeros((3, 2, 8), dtype=np.uint8)
    for i, (c, r) in enumerate([(3, 5), (2, 2), (6, 1)]):
        mask[i, 0, :c], mask[i, 1, :r] = 1, 1
    arrays = PairArrays(input_ids=ids, attention_mask=mask, n_tokens=int(mask.sum()))
    batch = to_batch(arrays, np.array([0, 1]), torch.device("cpu"), ignore_from=1)
    assert batch["input_ids"].shape == (2, 2, 5) and batch["attention_mask"].shape == (2, 2, 5)
    assert batch["labels"].tolist() == [1, -100]  # the padding pair is not counted
    batches = TrainBatches(arrays, 1, 1, 0, 1, 0, False)
    assert batches.seq_len == 8 and batches.tokens_per_sample == pytest.approx(19 / 3)


def test_pairs_count_cut_examples_by_pair_not_by_text(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A pair is one example: cut when either of its texts is, its tokens both texts' (the line
    once said "4 of 8 examples" for these 4 pairs)."""
    import logging

    from datasets import Dataset

    from clustertune.data.sources import RawData
    from clustertune.models.tokenizer import train_bpe

    recipe = load_recipe({"name": "rm", "task": "reward_model", "model": {"name_or_path": str(tmp_path / "base")},
                          "data": {"dataset": "builtin:pydoc-preferences", "max_length": 8, "truncation": "allow"}})
    long = "a much longer text that will not fit in eight tokens"
    tok = train_bpe(["short", long] * 20, 300, classification=True, model_max_length=8)
    ds = Dataset.from_dict({"prompt": ["q "] * 4, "chosen": ["short", long, "short", long],
                            "rejected": ["short", "short", long, long]})
    job = BuildJob(recipe=recipe, out=tmp_path, tokenizer=tok, raw=lambda: RawData(train=ds, validation=ds), workers=1)
    with caplog.at_level(logging.INFO, logger="clustertune"):
        built = shapes.shape_of(recipe).build(job)
    train = built.splits["train"]
    assert (train["examples_read"], train["truncated"]) == (4, 3)
    one = len(tok("q " + long)["input_ids"])  # one long text before the cut, special tokens included
    assert train["longest"] == one and train["tokens_cut"] == 4 * (one - 8)
    assert "data: train: 3 of 4 examples (75.0%)" in caplog.text
