"""Bad data found while it is prepared, before any model is loaded: every problem named by the
file and line (JSON lines, CSV), row (parquet) it was read from, never by its index after the
validation split was carved; up to five shown with the count; exit 2, no traceback, no run
directory. Each case is a file the test writes, run through the CLI in this process."""

from __future__ import annotations

import json
import re
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustertune.cli.main import main
from clustertune.errors import DataError
from tests.helpers import tree_snapshot
from tests.sft_fixtures import arithmetic_rows

Rows = list[Any]


def _turns(*pairs: tuple[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in pairs]}


GOOD = arithmetic_rows(40)


def _jsonl(rows: Rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _with(at: dict[int, Any]) -> bytes:
    """The good rows with the rows at these (0-based) positions replaced: file line = position + 1."""
    rows: Rows = list(GOOD)
    for i, row in at.items():
        rows[i] = row
    return _jsonl(rows)


def _recipe(d: Path, base: Path, train: str, **data: Any) -> str:
    sft = {"chat_template": "chatml", "generation_samples": 2, "max_new_tokens": 4, **data.pop("sft", {})}
    recipe = {"name": "pre", "task": "sft", "model": {"name_or_path": str(base)},
              "data": {"train_files": [train], "max_length": 64, "validation_fraction": 0.25, "sft": sft, **data},
              "train": {"max_steps": 1, "batch_size": 2, "cpu_threads": 1}}
    (d / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return str(d / "r.yaml")


Case = tuple[str, str, bytes | Callable[[Path], None], dict[str, Any], list[str]]

CASES: list[Case] = [
    ("roles-out-of-order", "train.jsonl",
     _with({4: _turns(("assistant", "hi"), ("user", "a")),
            12: _turns(("user", "a"), ("user", "b"), ("assistant", "c")),
            30: _turns(("user", "a"), ("system", "be brief"), ("assistant", "c"))}),
     {}, ["3 of 40 train and validation examples cannot be trained on", "train.jsonl' line 5: turn 0 is assistant where user",
          "line 13: turn 1 is user where assistant", "line 31: turn 1 is system", "data.sft.role_order=any"]),
    ("no-assistant-and-null-content", "train.jsonl",
     _with({12: _turns(("user", "only a question")), 20: _turns(("user", "q"), ("assistant", None))}),
     {}, ["train.jsonl' line 13: the conversation has no assistant turn",
          "train.jsonl' line 21: turn 1 (assistant) has content null, not a string"]),
    ("more-than-five-shown-as-five-and-counted", "train.jsonl",
     _with({i: _turns(("assistant", "first"), ("user", "second")) for i in range(3, 24, 3)}),
     {}, ["7 of 40 train and validation examples cannot be trained on (the first 5)", "line 4:", "line 16:"]),
    ("broken-json-line", "train.jsonl",
     _jsonl(GOOD[:36]) + b'{"messages": [{"role": "user", "content": "a"}\n' + _jsonl(GOOD[36:]),
     {}, ["train.jsonl': 1 line(s) are not JSON objects", "line 37 is not JSON"]),
    ("array-lines", "train.jsonl", _jsonl(GOOD[:3]) + b'["user", "hi"]\n' + _jsonl(GOOD[3:]),
     {}, ["line 4 is a JSON array, not an object"]),
    ("utf16-file", "train.jsonl", _jsonl(GOOD).decode().encode("utf-16"),
     {}, ["is UTF-16LE text", "iconv -f UTF-16LE -t UTF-8"]),
    ("one-example-in-a-huge-line", "train.jsonl", _jsonl([_turns(("user", "x " * 2000), ("assistant", "y"))]),
     {}, ["only 1 training example(s)", "data.validation_files=FILE"]),
    ("csv-row", "train.csv",
     b"prompt,completion\n" + b"".join(f"q{i},a{i}\n".encode() for i in range(10)) + b"q10,\n",
     {}, ["1 of 11 train and validation examples", "train.csv' line 12: column 'completion' is empty"]),
    ("truncated-answers", "train.jsonl",
     _with({i: _turns(("user", "word " * 70), ("assistant", "gone")) for i in range(0, 40, 4)}),
     {}, ["data.max_length: ", "examples (", "cut at data.max_length=64", "data.truncation=allow",
          "data.sft.too_long=drop"]),
]


def _parquet(d: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"prompt": f"q{i}", "completion": f"a{i}"} for i in range(12)]
    rows[7]["completion"] = " "
    pq.write_table(pa.Table.from_pylist(rows), d / "train.parquet")


CASES.append(("parquet-row", "train.parquet", _parquet, {}, ["train.parquet' row index 7: column 'completion'"]))


@pytest.mark.parametrize(("name", "fname", "content", "data", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_data_exits_2_at_its_line_before_a_run_exists(
        sft_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        name: str, fname: str, content: Any, data: dict[str, Any], says: list[str]) -> None:
    work = tmp_path / "case"
    work.mkdir()
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(work / "runs"))
    monkeypatch.setenv("CLUSTERTUNE_CACHE", str(tmp_path / "cache"))
    if callable(content):
        content(work)
    else:
        (work / fname).write_bytes(content)
    recipe = _recipe(work, sft_base, str(work / fname), **data)
    before = tree_snapshot(work)
    rc = main(["run", recipe, "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err, err
    for s in says:
        assert s in err, (s, err)
    assert not re.search(r"example \d", err)  # named where it was read, never by its index after the split
    assert tree_snapshot(work) == before and not (work / "runs").exists()  # no run directory
    cache = tmp_path / "cache"
    assert not cache.exists() or [p for p in cache.iterdir() if not p.name.startswith(".")
                                  and p.name != "tokenizers"] == []  # nothing half-prepared kept


def test_role_order_any_accepts_tool_turns_and_truncation_allow_goes_on(
        sft_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The switches: the same data passes once the recipe says so, and the cut share is printed."""
    import clustertune as ct
    from clustertune.data.cache import prepare

    rows = _with({4: _turns(("user", "call it"), ("assistant", "calling"), ("tool", "42"), ("assistant", "42")),
                  8: _turns(("assistant", "hello"), ("user", "hi"), ("assistant", "ok"))})
    (tmp_path / "t.jsonl").write_bytes(rows)
    r = yaml.safe_load(Path(_recipe(tmp_path, sft_base, str(tmp_path / "t.jsonl"))).read_text())
    monkeypatch.setenv("CLUSTERTUNE_CACHE", str(tmp_path / "cache"))
    r["data"]["sft"]["role_order"] = "any"
    with caplog.at_level(logging.INFO, logger="clustertune"):
        prepare(ct.load_recipe(r))
    assert "0 of 30 examples (0.0%) and 0 of " in caplog.text and "trained tokens (0.0%) cut" in caplog.text
    long = _with({i: _turns(("user", "word " * 70), ("assistant", "gone")) for i in range(0, 40, 4)})
    (tmp_path / "long.jsonl").write_bytes(long)
    r["data"].update(train_files=[str(tmp_path / "long.jsonl")], truncation="allow")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="clustertune"):
        prep = prepare(ct.load_recipe(r))
    split = prep.manifest.split("train")
    assert split.truncated and split.tokens_cut and split.examples_read == 30
    # A cache hit holds the recipe to its own setting: the entry built with allow is refused under error.
    r["data"]["truncation"] = "error"
    with pytest.raises(DataError, match="data.truncation=allow"):
        prepare(ct.load_recipe(r))
