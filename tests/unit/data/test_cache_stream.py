"""Streaming: the same blocks as prepared data, sharded by block index, resumable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clustertune.data import builtin
from clustertune.data.cache import prepare
from clustertune.data.stream import BlockStream, StreamingDataset, StreamState, texts_of_files
from clustertune.recipe import load_recipe
from tests.helpers import TINY_CAUSAL, with_


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("stream")
    paras = builtin.pydoc_paragraphs()
    train = tmp / "train.jsonl"
    train.write_text("".join(json.dumps({"text": p}) + "\n" for p in paras[:700]))
    val = tmp / "val.txt"
    val.write_text("\n".join(p.replace("\n", " ") for p in paras[700:760]) + "\n")
    r = load_recipe(with_(TINY_CAUSAL, model={"tokenizer_vocab_size": 300},
                          data={"dataset": None, "train_files": [str(train)], "validation_files": [str(val)],
                                "block_size": 32}))
    p = prepare(r, cache_dir=tmp / "cache")
    stream = BlockStream(texts_of_files([str(train)]), p.tokenizer(), 32, chunk_texts=97)
    return {"prepared": np.asarray(p.open_split("train").input_ids), "stream": stream,
            "train_file": str(train), "val_file": str(val)}


def test_streamed_blocks_equal_prepared_blocks(setup: dict[str, Any]) -> None:
    got = [(g, b) for g, b, _ in setup["stream"].blocks()]
    assert [g for g, _ in got] == list(range(len(got)))
    assert np.array_equal(np.stack([b for _, b in got]), setup["prepared"])


def test_sharded_over_ranks_and_workers_by_block_index(setup: dict[str, Any]) -> None:
    stream, n = setup["stream"], len(setup["prepared"])
    seen: dict[int, tuple[int, int]] = {}
    for rank in range(2):
        for worker in range(3):
            for g, block, _ in stream.shard(rank, 2, worker, 3, batch=4):
                assert g not in seen and g % 2 == rank and ((g // 2) // 4) % 3 == worker
                assert np.array_equal(block, setup["prepared"][g])
                seen[g] = (rank, worker)
    assert sorted(seen) == list(range(n))  # every block exactly once


def test_resume_from_a_state_or_a_block_index(setup: dict[str, Any]) -> None:
    stream, ref = setup["stream"], setup["prepared"]
    it = stream.blocks()
    for g, _, state in it:  # noqa: B007  (state is read after the loop)
        if g == 150:
            break
    saved = StreamState.from_dict(json.loads(json.dumps(state.to_dict())))  # as a checkpoint keeps it
    assert len(saved.carry) < 32
    rest = [(g, b) for g, b, _ in stream.blocks(saved)]
    assert rest[0][0] == 151 and np.array_equal(np.stack([b for _, b in rest]), ref[151:])
    replay = [g for g, _, _ in stream.blocks(start_block=151)]
    assert replay == list(range(151, len(ref)))
    # At another world size: rank 1 of 3 continues with its blocks after the saved position.
    mine = [g for g, _, _ in stream.shard(1, 3, state=saved)]
    assert mine == [g for g in range(151, len(ref)) if g % 3 == 1]


def test_dataloader_workers_give_the_rank_its_blocks_in_order(setup: dict[str, Any]) -> None:
    import torch

    ds = StreamingDataset(setup["stream"], rank=0, world=2, batch=4)
    dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)
    got = torch.cat([b for b in dl]).numpy()
    mine = setup["prepared"][0::2]
    full = len(mine) // 4 * 4  # workers hold whole micro-batches; a short last one comes from one
    assert np.array_equal(got[:full], mine[:full])


def test_texts_of_a_save_to_disk_source_stream_like_prepare(tmp_path_factory: pytest.TempPathFactory) -> None:
    from datasets import Dataset, DatasetDict

    from clustertune.data.stream import texts_of_source

    tmp = tmp_path_factory.mktemp("disk")
    paras = builtin.pydoc_paragraphs()
    DatasetDict({"train": Dataset.from_dict({"text": paras[:500]}),
                 "validation": Dataset.from_dict({"text": paras[500:540]})}).save_to_disk(str(tmp / "ds"))
    r = load_recipe(with_(TINY_CAUSAL, model={"tokenizer_vocab_size": 300},
                          data={"dataset": str(tmp / "ds"), "block_size": 32}))
    p = prepare(r, cache_dir=tmp / "cache")
    stream = BlockStream(texts_of_source(r.data), p.tokenizer(), 32, chunk_texts=128)
    got = np.stack([b for _, b, _ in stream.blocks()])
    assert np.array_equal(got, np.asarray(p.open_split("train").input_ids))


def test_stream_batches_are_the_prepared_order_and_resume_at_another_world_size(setup: dict[str, Any]) -> None:
    import torch

    from clustertune.data.loader import Position, StreamBatches

    stream, ref = setup["stream"], setup["prepared"]
    cpu = torch.device("cpu")
    one = StreamBatches(stream, 4, 2, 0, 1)  # global batch 8
    it = one.iterate(Position(), cpu)
    seen = []
    for _ in range(5):
        micro, pos = next(it)
        seen.append(torch.cat([m["input_ids"] for m in micro]).numpy())
    assert np.array_equal(np.concatenate(seen), ref[:40]) and pos.samples_seen == 40 and pos.stream
    saved = Position.from_dict(json.loads(json.dumps(pos.to_dict())))
    # Two ranks, 4 blocks each per step: together the very next 8 blocks, strided.
    parts = [next(StreamBatches(stream, 2, 2, r, 2).iterate(saved, cpu))[0] for r in range(2)]
    got = [torch.cat([m["input_ids"] for m in p]).numpy() for p in parts]
    assert np.array_equal(got[0], ref[40:48:2]) and np.array_equal(got[1], ref[41:48:2])
    # Without the saved stream state, the position alone replays the text up to it.
    replayed = next(StreamBatches(stream, 4, 2, 0, 1).iterate(Position(0, 40, 40, None), cpu))[0]
    assert np.array_equal(torch.cat([m["input_ids"] for m in replayed]).numpy(), ref[40:48])


def test_a_streaming_run_trains_and_prepares_only_validation(setup: dict[str, Any], runs_root: Path, tmp_path: Path) -> None:
    import clustertune as ct
    from clustertune.errors import RecipeError

    train_file = Path(setup["train_file"])
    r = with_(TINY_CAUSAL, model={"tokenizer_vocab_size": 300},
              data={"dataset": None, "train_files": [str(train_file)], "validation_files": [setup["val_file"]],
                    "block_size": 32, "streaming": True, "cache_dir": str(tmp_path / "c")},
              train={"max_steps": 3, "log_every": 1, "eval_at_start": False, "batch_size": 4})
    run = ct.run(load_recipe(r), show_progress=False)
    assert run.state.value == "COMPLETED"
    ref = json.loads(run.paths.data.read_text())
    man = json.loads(Path(ref["manifest"]).read_text())
    assert man["streaming"] and list(man["splits"]) == ["validation"]
    rows = [json.loads(x) for x in run.paths.metrics.read_text().splitlines()]
    assert [x["samples_seen"] for x in rows if x["kind"] == "train"] == [4, 8, 12]
    with pytest.raises(RecipeError, match="data.streaming: needs train.max_steps"):
        load_recipe(with_(r, train={"max_steps": None}))
