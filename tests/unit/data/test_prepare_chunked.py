"""A causal-LM prepare of local files reads, tokenizes and writes a chunk at a time, and gives
the same rows, blocks and bytes as tokenizing the whole text at once."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clustertune.data.builtin import pydoc_paragraphs
from clustertune.data.cache import prepare
from clustertune.data.manifest import write_array
from clustertune.data.shapes import packed_text
from clustertune.data.blocks import BlockWriter
from clustertune.data.sources import ArrowGaveUp, as_text, load_raw, text_chunks_of_files
from clustertune.errors import DataError
from clustertune.models.tokenizer import train_bpe
from clustertune.recipe import load_recipe

PARAS = list(itertools.islice(pydoc_paragraphs(), 120))


def write_files(d: Path) -> tuple[list[Path], Path]:
    """A .jsonl with blank lines, nulls and odd values, a .txt with every kind of line break, a .parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d.mkdir(parents=True, exist_ok=True)
    rows = [{"text": t} for t in PARAS[:60]] + [{"text": None}, {"text": ""}]
    jl = d / "a.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in rows[:30]) + "\n\n  \n"
                  + "\n".join(json.dumps(r) for r in rows[30:]) + "\n")
    txt = d / "b.txt"
    breaks = "first line\r\nsecond\rthird\x0cfourth\u2028fifth\n\n   \n"
    txt.write_text(breaks + "\n".join(PARAS[60:90]), encoding="utf-8")
    pa_file = d / "c.parquet"
    pq.write_table(pa.table({"text": PARAS[90:110] + [None]}), pa_file, row_group_size=7)
    val = d / "val.jsonl"
    val.write_text("".join(json.dumps({"text": t}) + "\n" for t in PARAS[110:]))
    return [jl, txt, pa_file], val


@pytest.fixture()
def tok_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tok"
    train_bpe(PARAS, 400, classification=False, model_max_length=64).save_pretrained(str(d))
    return d


def recipe(files: list[Path], val: Path, tok_dir: Path, root: Path, **data: Any) -> Any:
    return load_recipe({
        "name": "chunks", "task": "causal_lm", "model": {"config": "gpt2", "tokenizer": str(tok_dir)},
        "data": {"train_files": [str(f) for f in files], "validation_files": [str(val)], "block_size": 16,
                 "cache_dir": str(root), **data},
    })


def test_chunks_hold_the_rows_the_whole_file_reader_gives(tmp_path: Path) -> None:
    files, val = write_files(tmp_path)
    r = recipe(files, val, tmp_path, tmp_path / "c")
    whole = [as_text(t) for t in load_raw(r.data, 0).train["text"]]
    for arrow in (True, False):
        chunks = list(text_chunks_of_files([str(f) for f in files], "text", "data.train_files", 300, arrow))
        assert list(itertools.chain.from_iterable(chunks)) == whole
        assert len(chunks) > 10 or arrow  # Arrow reads at least 1 MiB at a time


def test_chunked_prepare_gives_the_blocks_and_bytes_of_the_whole_text(tmp_path: Path, tok_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoTokenizer

    files, val = write_files(tmp_path / "data")
    whole = prepare(recipe(files, val, tok_dir, tmp_path / "one"))  # one chunk per split
    monkeypatch.setattr(packed_text, "CHUNK_CHARS", 1000)
    monkeypatch.setenv("CLUSTERTUNE_SHARD_BYTES", "3200")  # and several shards
    chunked = prepare(recipe(files, val, tok_dir, tmp_path / "many"))
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    texts = [as_text(t) for t in load_raw(recipe(files, val, tok_dir, tmp_path).data, 0).train["text"]]
    flat = np.fromiter(itertools.chain.from_iterable(tok(texts, verbose=False)["input_ids"]), dtype=np.int64)
    for p in (whole, chunked):
        got = np.asarray(p.open_split("train").input_ids).astype(np.int64)
        assert np.array_equal(got, flat[: len(got) * 16].reshape(-1, 16)) and len(got) == len(flat) // 16
        assert p.counts("train")["examples"] == len(texts)
    shards = chunked.manifest.split("train").arrays["input_ids"].shards
    assert len(shards) > 3
    joined = b"".join((chunked.dir / s.file).read_bytes() for s in shards)
    assert joined == (whole.dir / "train.input_ids.00000.bin").read_bytes()


def test_max_samples_and_too_little_text(tmp_path: Path, tok_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files, val = write_files(tmp_path / "data")
    monkeypatch.setattr(packed_text, "CHUNK_CHARS", 200)
    p = prepare(recipe(files, val, tok_dir, tmp_path / "c", max_train_samples=5))
    rows = len(load_raw(recipe(files, val, tok_dir, tmp_path).data, 0).train)
    assert p.counts("train")["samples"] == 5 and p.counts("train")["examples"] == rows
    tiny = tmp_path / "tiny.jsonl"
    tiny.write_text('{"text": "hi"}\n')
    with pytest.raises(DataError, match="fewer tokens than one block of 16"):
        prepare(recipe([tiny], val, tok_dir, tmp_path / "d"))
    with pytest.raises(DataError, match="data.text_column: column 'body' not in"):
        prepare(recipe(files, val, tok_dir, tmp_path / "e", text_column="body"))
    assert not any((tmp_path / "d").glob("[!.]*")) and not any((tmp_path / "e").glob("[!.]*"))


def test_a_file_arrow_cannot_read_is_read_line_by_line(tmp_path: Path, tok_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    files, val = write_files(tmp_path / "data")
    mixed = tmp_path / "mixed.jsonl"  # a string, then numbers: Arrow's reader refuses, pandas copes
    mixed.write_text("".join(json.dumps({"text": t}) + "\n" for t in PARAS[:40]) + '{"text": 12345}\n{"text": 6.5}\n')
    with pytest.raises(ArrowGaveUp):
        list(text_chunks_of_files([str(mixed)], "text", "data.train_files", 300))
    monkeypatch.setattr(packed_text, "CHUNK_CHARS", 300)
    p = prepare(recipe([mixed], val, tok_dir, tmp_path / "c"))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    flat = list(itertools.chain.from_iterable(tok(PARAS[:40] + ["12345", "6.5"], verbose=False)["input_ids"]))
    got = np.asarray(p.open_split("train").input_ids).astype(np.int64).ravel().tolist()
    assert got == flat[: len(got)] and len(got) == len(flat) // 16 * 16
    shards = p.manifest.split("train").arrays["input_ids"].shards
    assert sorted(f for f in p.manifest.files if f.startswith("train.")) == [s.file for s in shards]


@pytest.mark.parametrize("shard_bytes", ["64", "96", "100000"])
def test_block_writer_writes_what_write_array_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     shard_bytes: str) -> None:
    monkeypatch.setenv("CLUSTERTUNE_SHARD_BYTES", shard_bytes)
    ids = np.random.default_rng(0).integers(0, 60000, 1000).astype(np.uint16)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files_a: dict[str, Any] = {}
    files_b: dict[str, Any] = {}
    entry_a = write_array(tmp_path / "a", "x", ids[: 1000 // 8 * 8].reshape(-1, 8), files_a)
    w = BlockWriter(tmp_path / "b", "x", 8, np.uint16, files_b)
    for piece in np.split(ids, [3, 4, 4, 50, 333, 700]):
        w.add(piece)
    assert w.close() == entry_a and files_b == files_a


def test_the_next_chunk_is_read_while_the_one_before_is_used() -> None:
    """A chunk's reading (Arrow parsing JSON) overlaps the encoding of the one before, and the
    first the encoder's own setup; what reading raises comes where its chunk would have."""
    import threading

    from clustertune.data.sources import ReadAhead

    read: list[tuple[int, str]] = []
    first_read, second_read = threading.Event(), threading.Event()

    def chunks() -> Any:
        read.append((1, threading.current_thread().name))
        first_read.set()
        yield ["one"]
        read.append((2, threading.current_thread().name))
        second_read.set()
        yield ["two"]
        raise DataError("data.train_files: the third chunk is bad")

    ahead = ReadAhead(chunks())
    assert first_read.wait(10)  # before anything was taken
    assert next(ahead) == ["one"]
    assert second_read.wait(10)  # while "one" is in use
    assert all(name.startswith("clustertune-read") for _, name in read) and [i for i, _ in read] == [1, 2]
    assert next(ahead) == ["two"]
    with pytest.raises(DataError, match="third chunk"):
        next(ahead)
    with ReadAhead(iter([["a"], ["b"]])) as both:
        assert list(both) == [["a"], ["b"]]
