"""Staging to node-local disk, the node side (open_run_data), and the run integration."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clustertune.data import staging
from clustertune.data.cache import prepare
from clustertune.data.manifest import MANIFEST, XXH3
from clustertune.data.staging import open_run_data, resolve_stage_root, stage, write_run_data
from clustertune.errors import DataError, RunError
from clustertune.recipe import load_recipe
from clustertune.runs.paths import RunPaths
from tests.helpers import TINY_CAUSAL, read_jsonl, with_


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("stage-cache")
    return prepare(load_recipe(TINY_CAUSAL), cache_dir=root)


@pytest.fixture
def src(prepared: Any, tmp_path: Path) -> Path:
    """A private copy of the prepared entry (tests corrupt it)."""
    d = tmp_path / "shared" / prepared.fingerprint
    shutil.copytree(prepared.dir, d)
    return d


def test_stage_copies_verifies_and_skips_valid_files(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "node"
    res = stage(src, dest)
    man = json.loads((src / MANIFEST).read_text())
    assert res.dir == dest / man["fingerprint"] and res.copied_files == res.files == len(man["files"])
    assert res.copied_bytes == sum(f["bytes"] for f in man["files"].values())
    for name in man["files"]:
        assert (res.dir / name).read_bytes() == (src / name).read_bytes()
    assert (res.dir / MANIFEST).read_bytes() == (src / MANIFEST).read_bytes()
    again = stage(src, dest)
    assert again.copied_files == 0 and again.copied_bytes == 0
    # A corrupted node-local copy is detected by its checksum and replaced.
    shard = res.dir / "train.input_ids.00000.bin"
    data = bytearray(shard.read_bytes())
    data[3] ^= 1
    shard.write_bytes(bytes(data))
    third = stage(src, dest)
    assert third.copied_files == 1 and shard.read_bytes() == (src / shard.name).read_bytes()


def test_a_copy_says_what_it_stages_then_how_far_it_is(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import time

    real = staging._copy_checked

    def slow(*args: Any) -> Any:
        time.sleep(0.2)  # a large file on a slow disk
        return real(*args)

    monkeypatch.setattr(staging, "_copy_checked", slow)
    monkeypatch.setattr(staging, "PROGRESS_SECONDS", 0.05)
    monkeypatch.setattr(staging, "_workers", lambda: 1)
    with caplog.at_level(logging.INFO, logger="clustertune"):
        stage(src, tmp_path / "node")
    lines = caplog.messages
    files = len(json.loads((src / MANIFEST).read_text())["files"])
    assert lines[0].startswith(f"data: staging {src.name} to ") and f"({files} files, " in lines[0], lines
    progress = [ln for ln in lines if " MB copied (" in ln and "files to go)" in ln]
    assert progress, lines  # while the copies went on, not only once they were done
    assert lines[-1].startswith(f"data: staged {src.name} to "), lines


def _drop_xxh3(src: Path) -> None:
    """Make ``src``'s manifest look like one written before entries carried an XXH3-128."""
    man = json.loads((src / MANIFEST).read_text())
    for entry in man["files"].values():
        del entry[XXH3]
    (src / MANIFEST).write_text(json.dumps(man))


def test_manifest_entries_carry_both_checksums(src: Path) -> None:
    import xxhash

    man = json.loads((src / MANIFEST).read_text())
    for name, entry in man["files"].items():
        data = (src / name).read_bytes()
        assert entry[XXH3] == xxhash.xxh3_128(data).hexdigest() and entry["sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("checksum", ["XXH3-128", "sha256"])
def test_corrupt_shared_copy_is_refused_naming_the_file(src: Path, tmp_path: Path, checksum: str) -> None:
    if checksum == "sha256":
        _drop_xxh3(src)  # an older manifest: staging falls back to the sha256
        assert stage(src, tmp_path / "clean").copied_files == len(json.loads((src / MANIFEST).read_text())["files"])
    shard = src / "validation.input_ids.00000.bin"
    data = bytearray(shard.read_bytes())
    data[0] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"checksum error in .*validation.input_ids.00000.bin \(its {checksum} "
                                        r"differs.*prepare RECIPE --force"):
        stage(src, tmp_path / "node")
    assert not (tmp_path / "node" / src.name / MANIFEST).exists()  # nothing that looks complete
    assert not list((tmp_path / "node" / src.name).glob("validation.*"))  # the bad copy is not kept


def test_unusable_destinations_say_why(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError, match="stage destination .*file/sub cannot be created"):
        stage(src, blocker / "sub")
    monkeypatch.setattr(staging.os, "access", lambda p, mode: False)
    with pytest.raises(DataError, match="is not writable"):
        stage(src, tmp_path / "ro")
    monkeypatch.undo()
    monkeypatch.setattr(staging.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(DataError, match=r"has 0.0 MB free; this run's data needs 0.\d MB more"):
        stage(src, tmp_path / "small")


def test_stage_root_expands_on_the_node_with_a_logged_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("MY_TMP", str(tmp_path))
    assert resolve_stage_root("$MY_TMP/stage") == tmp_path / "stage"
    monkeypatch.delenv("SLURM_TMPDIR", raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    with caplog.at_level("INFO", logger="clustertune"):
        p = resolve_stage_root("$SLURM_TMPDIR")
    assert p.name == "clustertune-stage-4242" and "$SLURM_TMPDIR is not set" in caplog.text


def _run_dir(tmp_path: Path, prepared: Any) -> RunPaths:
    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir()
    write_run_data(prepared, paths)
    return paths


def test_open_run_data_stages_once_per_node(prepared: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _run_dir(tmp_path, prepared)
    assert (paths.tokenizer / "tokenizer.json").is_file()
    r = load_recipe(TINY_CAUSAL)
    copies: list[int] = []
    real = staging._copy_checked
    monkeypatch.setattr(staging, "_copy_checked", lambda s, d, w: (copies.append(1), real(s, d, w))[1])
    node = tmp_path / "node0"
    out: dict[int, Any] = {}

    def rank(i: int) -> None:
        out[i] = open_run_data(r, paths, local_rank=i, stage_dir=node, token="job-1")

    threads = [threading.Thread(target=rank, args=(i,)) for i in (3, 2, 1, 0)]  # the waiters start first
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(out) == [0, 1, 2, 3]
    assert len(copies) == len(prepared.manifest.files)  # copied once, by local rank 0
    for i in range(4):
        train, ev = out[i]
        assert Path(train.input_ids.filename).parent == node / prepared.fingerprint  # node-local, memory-mapped
        assert np.array_equal(np.asarray(train.input_ids), np.asarray(prepared.open_split("train").input_ids))
        assert len(ev) == prepared.counts("validation")["samples"]
    # Without staging the shared prepared directory is read in place.
    train, _ = open_run_data(r, paths)
    assert Path(train.input_ids.filename).parent == prepared.dir


def test_waiting_ranks_fail_fast_when_rank_zero_fails(prepared: Any, src: Path, tmp_path: Path) -> None:
    paths = _run_dir(tmp_path, prepared)
    ref = json.loads(paths.data.read_text())
    paths.data.write_text(json.dumps({**ref, "dir": str(src)}))  # a shared copy that is corrupt
    shard = src / "train.input_ids.00000.bin"
    shard.write_bytes(b"\xff" * shard.stat().st_size)
    r = load_recipe(TINY_CAUSAL)
    err: dict[str, BaseException] = {}

    def waiter() -> None:
        try:
            open_run_data(r, paths, local_rank=1, stage_dir=tmp_path / "n", token="job-2", timeout=60)
        except BaseException as exc:  # noqa: BLE001
            err["w"] = exc

    t = threading.Thread(target=waiter)
    t.start()
    with pytest.raises(DataError, match="checksum error in"):
        open_run_data(r, paths, local_rank=0, stage_dir=tmp_path / "n", token="job-2")
    t.join(60)
    assert isinstance(err.get("w"), DataError) and "failed in local rank 0: prepared data" in str(err["w"])
    with pytest.raises(DataError, match="waited 0s for local rank 0"):
        open_run_data(r, paths, local_rank=1, stage_dir=tmp_path / "m", token="job-3", timeout=0.2)


def test_run_prepares_once_writes_the_run_dir_and_stages(runs_root: Path, tmp_path: Path) -> None:
    import clustertune as ct

    recipe = with_(TINY_CAUSAL, train={"max_steps": 2, "eval_at_start": False, "log_every": 1},
                   data={"stage_to": str(tmp_path / "node-$CT_TEST_NODE")})
    import os

    os.environ["CT_TEST_NODE"] = "a"
    try:
        run = ct.run(load_recipe(recipe), show_progress=False)
    finally:
        del os.environ["CT_TEST_NODE"]
    assert run.state.value == "COMPLETED"
    ref = json.loads(run.paths.data.read_text())
    assert (tmp_path / "node-a" / ref["fingerprint"] / MANIFEST).is_file()  # staged where the node said
    assert (run.paths.tokenizer / "tokenizer.json").is_file()
    assert "staged" in run.paths.log.read_text()
    assert len([r for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"]) == 2
    # A resumed run must keep its data: changed data is refused before anything changes.
    run.info.state = "FAILED"  # as if it had died
    run.save()
    data_file = run.paths.data
    ref["fingerprint"] = "0" * 20
    data_file.write_text(json.dumps(ref))
    with pytest.raises(RunError, match="trained on prepared data 0000.*start a new run"):
        ct.run(resume=run.id)


def test_data_read_in_place_is_checked_before_first_use_with_a_flip_that_keeps_ids_in_range(
        prepared: Any, src: Path, tmp_path: Path) -> None:
    paths = _run_dir(tmp_path, prepared)
    ref = json.loads(paths.data.read_text())
    paths.data.write_text(json.dumps({**ref, "dir": str(src)}))
    r = load_recipe(TINY_CAUSAL)
    open_run_data(r, paths, local_rank=0, token="launch-1")  # intact: it opens, and the check is recorded
    shard = src / "train.input_ids.00000.bin"
    ids = np.fromfile(shard, dtype=np.uint16)
    vocab = int(ids.max()) + 1
    ids[5] = (ids[5] + 1) % vocab  # another valid token id: an id-range check would not see it
    ids.tofile(shard)
    open_run_data(r, paths, local_rank=0, token="launch-1")  # the same launch: checked once, not again
    err: dict[str, BaseException] = {}

    def waiter() -> None:
        try:
            open_run_data(r, paths, local_rank=1, token="launch-2", timeout=60)
        except BaseException as exc:  # noqa: BLE001
            err["w"] = exc

    t = threading.Thread(target=waiter)
    t.start()
    with pytest.raises(DataError, match=f"checksum error in {shard} \\(its XXH3-128 differs"):
        open_run_data(r, paths, local_rank=0, token="launch-2")
    t.join(60)
    assert isinstance(err.get("w"), DataError) and "checksum error in" in str(err["w"])
