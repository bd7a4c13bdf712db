"""The file-system building blocks everything durable goes through."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from pathlib import Path

import pytest
import xxhash

from clustertune import fsutil


def test_atomic_writes_leave_only_the_file(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    fsutil.atomic_write_json(target, {"b": 1, "a": [1, 2]})
    fsutil.atomic_write_json(target, {"state": "RUNNING"}, fsync=True)
    assert json.loads(target.read_text()) == {"state": "RUNNING"}
    assert target.read_text().endswith("\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_private_file_is_never_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "clusters.yaml"
    fsutil.atomic_write_text(target, "secret: 1\n", mode=0o600)
    assert target.stat().st_mode & 0o077 == 0


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "data.json"
    fsutil.atomic_write_json(target, {"ok": True})
    with pytest.raises(TypeError):
        fsutil.atomic_write_json(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"ok": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json"]


def test_digests_match_the_reference_implementations(tmp_path: Path) -> None:
    f = tmp_path / "shard.bin"
    data = os.urandom(3 * (1 << 20) + 17)
    f.write_bytes(data)
    assert fsutil.sha256_file(f) == hashlib.sha256(data).hexdigest()
    assert fsutil.xxh3_file(f) == xxhash.xxh3_128(data).hexdigest()
    assert fsutil.digest({"b": 1, "a": 2}) == fsutil.digest({"a": 2, "b": 1})


def _build_counting(final: str, counter: str) -> None:
    def build(tmp: Path) -> None:
        tmp.mkdir()
        with open(counter, "a") as fh:  # one line per build that actually ran
            fh.write("built\n")
        (tmp / "DONE").write_text("x")

    fsutil.build_dir_once(Path(final), build, what="a test build", is_complete=lambda p: (p / "DONE").is_file())


def test_build_dir_once_across_processes(tmp_path: Path) -> None:
    final, counter = tmp_path / "entry", tmp_path / "builds.txt"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_build_counting, args=(str(final), str(counter))) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert counter.read_text().splitlines() == ["built"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".entry.lock", "builds.txt", "entry"]


def test_build_dir_once_replaces_a_damaged_dir_and_cleans_up_a_failed_build(tmp_path: Path) -> None:
    final = tmp_path / "entry"
    final.mkdir()
    (final / "half-written").write_text("x")  # no DONE: damaged

    def failing(tmp: Path) -> None:
        tmp.mkdir()
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        fsutil.build_dir_once(final, failing, what="t", is_complete=lambda p: (p / "DONE").is_file())
    assert sorted(p.name for p in final.iterdir()) == ["half-written"]  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == [".entry.lock", "entry"]

    def good(tmp: Path) -> None:
        tmp.mkdir()
        (tmp / "DONE").write_text("x")

    assert fsutil.build_dir_once(final, good, what="t", is_complete=lambda p: (p / "DONE").is_file())
    assert sorted(p.name for p in final.iterdir()) == ["DONE"]
    assert not fsutil.build_dir_once(final, good, what="t", is_complete=lambda p: (p / "DONE").is_file())


def test_out_of_space_is_recognised_through_the_errors_it_caused() -> None:
    import errno

    from clustertune.fsutil import free_mb, is_no_space

    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise full
        except OSError as exc:
            raise RuntimeError("write failed") from exc
    except RuntimeError as wrapped:
        assert is_no_space(wrapped)
    assert is_no_space(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_no_space(OSError(errno.EACCES, "Permission denied"))
    assert not is_no_space(ValueError("no space"))
    assert free_mb(Path("/nonexistent/deeper")) is not None  # measured at the nearest existing parent
