"""Prepared-data cache: fingerprint stability and sensitivity, hits, atomicity, locking, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clustertune.data import builtin, cache, fingerprint
from clustertune.data.cache import fingerprint_of, prepare
from clustertune.data.manifest import load_manifest
from clustertune.errors import DataError
from clustertune.recipe import load_recipe
from tests.helpers import TINY_CAUSAL, TINY_CLS, tree_snapshot, with_

REPO = Path(__file__).resolve().parents[3]


def write_corpus(path: Path, n: int = 240, offset: int = 0) -> Path:
    paras = builtin.pydoc_paragraphs()[offset : offset + n]
    path.write_text("".join(json.dumps({"text": p, "label": i % 2}) + "\n" for i, p in enumerate(paras)))
    return path


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    r = tmp_path / "cache"
    monkeypatch.setenv("CLUSTERTUNE_CACHE", str(r))
    return r


@pytest.fixture
def files_recipe(tmp_path: Path) -> dict[str, Any]:
    f = write_corpus(tmp_path / "corpus.jsonl")
    return with_(TINY_CAUSAL, model={"tokenizer_vocab_size": 300},
                 data={"dataset": None, "train_files": [str(f)], "block_size": 32, "max_eval_samples": None})


def fp(d: dict[str, Any], *overrides: str) -> str:
    return fingerprint_of(load_recipe(d, list(overrides)))[0]


# -- fingerprint ---------------------------------------------------------------------------------


def test_fingerprint_is_stable_and_ignores_unrelated_settings(root: Path, files_recipe: dict[str, Any]) -> None:
    base = fp(files_recipe)
    assert fp(files_recipe) == base
    for unrelated in ("train.lr=0.1", "train.batch_size=3", "train.max_steps=7", "model.config_overrides.n_layer=3",
                      "data.workers=3", "data.stage_to=/tmp/x", "name=other", "train.save_every=5",
                      "train.seed=1"):  # the validation carve-out has its own seed
        assert fp(files_recipe, unrelated) == base, unrelated
    # A copy of the file elsewhere (same bytes) is the same data.
    moved = Path(files_recipe["data"]["train_files"][0]).with_name("moved.jsonl")
    moved.write_bytes(Path(files_recipe["data"]["train_files"][0]).read_bytes())
    assert fp(with_(files_recipe, data={"train_files": [str(moved)]})) == base


@pytest.mark.parametrize("override", [
    "data.block_size=16", "data.max_train_samples=5", "data.max_eval_samples=3", "model.tokenizer_vocab_size=320",
    "data.validation_fraction=0.2", "data.split_seed=1", "data.validation_carve=first", "data.keep_linebreaks=false",
])
def test_fingerprint_changes_with_each_recipe_input(root: Path, files_recipe: dict[str, Any], override: str) -> None:
    assert fp(files_recipe, override) != fp(files_recipe)


def test_fingerprint_changes_with_file_content_and_memoises_hashes(root: Path, files_recipe: dict[str, Any]) -> None:
    f = Path(files_recipe["data"]["train_files"][0])
    base = fp(files_recipe)
    memo = fingerprint.HashMemo(root)
    memo.sha256(f)
    assert memo.hashed == []  # unchanged file (path, size, mtime, inode): not read again
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    memo.sha256(f)
    assert memo.hashed == [str(f.resolve())]  # touched: hashed again ...
    assert fp(files_recipe) == base  # ... and the same bytes are the same data
    with f.open("a") as fh:
        fh.write(json.dumps({"text": "one more line", "label": 0}) + "\n")
    assert fp(files_recipe) != base


def test_fingerprint_changes_with_task_format_and_corpus_version(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = load_recipe(TINY_CAUSAL)
    base = fingerprint_of(r)[0]
    cls = with_(TINY_CLS, data={"dataset": "builtin:pydoc", "validation_fraction": 0.05, "max_length": 64})
    assert fp(cls) != base  # task (and what follows from it)
    monkeypatch.setattr(fingerprint, "FORMAT_VERSION", fingerprint.FORMAT_VERSION + 1)
    assert fingerprint_of(r)[0] != base
    monkeypatch.undo()
    monkeypatch.setenv("CLUSTERTUNE_CACHE", str(root))
    monkeypatch.setattr(builtin, "corpus_version", lambda: "pydoc_data/python-0.0.0")
    assert fingerprint.source_identity(r.data, fingerprint.HashMemo(None))["version"] == "pydoc_data/python-0.0.0"


def test_tokenizer_content_not_class_decides(tmp_path: Path) -> None:
    from transformers import GPT2TokenizerFast, PreTrainedTokenizerFast

    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(["alpha beta gamma delta"] * 50, 270, classification=False, model_max_length=32)
    tok.save_pretrained(str(tmp_path / "t"))
    other_class = GPT2TokenizerFast(tokenizer_object=tok.backend_tokenizer, **tok.special_tokens_map)
    reloaded = PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "t"))
    h = fingerprint.tokenizer_content_hash(tok)
    assert fingerprint.tokenizer_content_hash(reloaded) == h
    assert fingerprint.tokenizer_content_hash(other_class) == h
    reloaded.pad_token = tok.eos_token  # a special token changed: different output for padding
    assert fingerprint.tokenizer_content_hash(reloaded) != h
    bigger = train_bpe(["alpha beta gamma delta"] * 50, 280, classification=False, model_max_length=32)
    assert fingerprint.tokenizer_content_hash(bigger) != h


def test_changed_local_tokenizer_gives_a_new_fingerprint(root: Path, files_recipe: dict[str, Any], tmp_path: Path) -> None:
    from clustertune.models.tokenizer import train_bpe

    d = tmp_path / "tok"
    train_bpe(["alpha beta gamma delta epsilon"] * 80, 280, classification=False, model_max_length=64).save_pretrained(str(d))
    r = with_(files_recipe, model={"tokenizer": str(d)})
    p1 = prepare(load_recipe(r))
    train_bpe(["zeta eta theta iota kappa"] * 80, 280, classification=False, model_max_length=64).save_pretrained(str(d))
    p2 = prepare(load_recipe(r))
    assert p2.fingerprint != p1.fingerprint and not p2.hit  # never a silent reuse


def test_hub_revision_resolves_the_same_online_and_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    refs = tmp_path / "hub" / "datasets--someorg--corpus" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(sha)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    d = load_recipe(TINY_CAUSAL, ["data.dataset=someorg/corpus"]).data
    offline = fingerprint.source_identity(d, fingerprint.HashMemo(None))
    assert offline["commit"] == sha

    import huggingface_hub

    class Info:
        pass

    info = Info()
    info.sha = sha  # type: ignore[attr-defined]
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, name, revision=None: info)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert fingerprint.source_identity(d, fingerprint.HashMemo(None)) == offline
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="no local snapshot.*clustertune fetch"):
        fingerprint.source_identity(load_recipe(TINY_CAUSAL, ["data.dataset=someorg/other"]).data, fingerprint.HashMemo(None))


def test_trained_tokenizer_is_cached_and_deterministic(tmp_path: Path, files_recipe: dict[str, Any]) -> None:
    r = load_recipe(files_recipe)
    fingerprint_of(r, tmp_path / "a")
    fingerprint_of(r, tmp_path / "b")
    a, b = [sorted((tmp_path / x / "tokenizers").iterdir()) for x in ("a", "b")]
    dirs = [p for p in a if p.is_dir()], [p for p in b if p.is_dir()]
    assert len(dirs[0]) == len(dirs[1]) == 1 and dirs[0][0].name == dirs[1][0].name
    assert tree_snapshot(dirs[0][0]) == tree_snapshot(dirs[1][0])  # byte for byte


# -- prepare -------------------------------------------------------------------------------------


def test_prepare_writes_manifest_and_memmaps_the_same_blocks(root: Path, files_recipe: dict[str, Any]) -> None:
    r = load_recipe(files_recipe)
    p = prepare(r, workers=2)
    assert not p.hit and p.dir == root / p.fingerprint
    m = json.loads(p.manifest_path.read_text())
    assert m["format"] == 1 and m["fingerprint"] == p.fingerprint and m["dtype"] == "<u2"
    assert m["inputs"]["processing"]["block_size"] == 32 and m["tokenizer"]["sha256"]
    for name, f in m["files"].items():
        assert (p.dir / name).stat().st_size == f["bytes"] and len(f["sha256"]) == 64
    assert any(n.startswith("tokenizer/") for n in m["files"])
    train = p.open_split("train")
    assert isinstance(train.input_ids, np.memmap) and train.input_ids.shape[1] == 32
    # The same blocks as tokenizing in memory with the transformers call, every text's ids
    # concatenated and cut into blocks of 32 (one global remainder, dropped).
    from clustertune.data.sources import load_raw

    raw = load_raw(r.data, r.train.seed)
    tok = p.tokenizer()
    ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in tok(list(raw.train["text"]), verbose=False)["input_ids"]])
    ref = ids[: len(ids) // 32 * 32].reshape(-1, 32)
    assert np.array_equal(np.asarray(train.input_ids), ref)
    assert train.tokens == ref.size == m["splits"]["train"]["tokens"]
    again = prepare(r, workers=1, force=True)  # worker count does not change the bytes
    assert again.fingerprint == p.fingerprint and np.array_equal(np.asarray(again.open_split("train").input_ids), ref)


def test_classification_prepare(root: Path) -> None:
    p = prepare(load_recipe(TINY_CLS))
    tr = p.open_split("train")
    assert tr.attention_mask is not None and tr.labels is not None and tr.labels.dtype == np.int64
    assert tr.input_ids.shape == tr.attention_mask.shape == (len(tr), 32)
    assert tr.tokens == int(np.asarray(tr.attention_mask).sum())


def test_cache_hit_reads_no_raw_data(root: Path, files_recipe: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    r = load_recipe(files_recipe)
    first = prepare(r)

    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("raw data loaded on a cache hit")

    monkeypatch.setattr(cache, "load_raw", boom)
    hit = prepare(r)
    assert hit.hit and hit.fingerprint == first.fingerprint  # and no raw data was read (boom above)


def test_multi_shard_arrays_index_like_one(root: Path, files_recipe: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    one = prepare(load_recipe(files_recipe)).open_split("train")
    monkeypatch.setenv("CLUSTERTUNE_SHARD_BYTES", "1000")
    p = prepare(load_recipe(files_recipe), force=True)
    many = p.open_split("train")
    assert len(p.manifest.split("train").arrays["input_ids"].shards) > 3
    full = np.asarray(one.input_ids)
    idx = np.random.default_rng(0).permutation(len(full))[:50]
    assert np.array_equal(many.input_ids[idx], full[idx])
    assert np.array_equal(many.input_ids[-1], full[-1]) and many.input_ids.shape == full.shape


def test_too_little_text_and_missing_column_fail_and_damage_nothing(root: Path, files_recipe: dict[str, Any], tmp_path: Path) -> None:
    prepare(load_recipe(files_recipe))
    before = tree_snapshot(root)
    tiny = tmp_path / "tiny.jsonl"
    tiny.write_text("".join(json.dumps({"text": f"w{i}"}) + "\n" for i in range(4)))
    with pytest.raises(DataError, match="fewer tokens than one block of 32"):
        prepare(load_recipe(with_(files_recipe, data={"train_files": [str(tiny)]})))
    with pytest.raises(DataError, match="data.text_column: column 'body' not in"):
        prepare(load_recipe(files_recipe, ["data.text_column=body"]))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataError):
        prepare(load_recipe(with_(files_recipe, data={"train_files": [str(empty)]})))
    after = {k: v for k, v in tree_snapshot(root).items() if k in before}
    assert after == before  # existing entries untouched by failed prepares
    assert not list(root.glob(".tmp-*"))


def test_damaged_entries_name_the_file_and_the_fix(root: Path, files_recipe: dict[str, Any]) -> None:
    r = load_recipe(files_recipe)
    p = prepare(r)
    shard = p.dir / "train.input_ids.00000.bin"
    data = bytearray(shard.read_bytes())
    data[10] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert prepare(r).hit  # a hit checks sizes only ...
    with pytest.raises(DataError, match=r"checksum error in .*train.input_ids.00000.bin.*prepare RECIPE --force"):
        load_manifest(p.dir).verify()  # ... `cache verify` and staging check sha256
    shard.write_bytes(bytes(data[:-7]))
    with pytest.raises(DataError, match=r"train.input_ids.00000.bin is truncated .*--force"):
        prepare(r)
    shard.unlink()
    with pytest.raises(DataError, match=r"train.input_ids.00000.bin is missing.*--force"):
        prepare(r)
    fixed = prepare(r, force=True)
    assert not fixed.hit
    load_manifest(fixed.dir).verify()


def test_newer_manifest_format_is_refused(root: Path, files_recipe: dict[str, Any]) -> None:
    p = prepare(load_recipe(files_recipe))
    m = json.loads(p.manifest_path.read_text())
    m["format"] = 99
    p.manifest_path.write_text(json.dumps(m))
    with pytest.raises(DataError, match="format 99, newer than this clustertune reads .*upgrade clustertune"):
        prepare(load_recipe(files_recipe))
    p.manifest_path.write_text("{not json")
    with pytest.raises(DataError, match="manifest.json is corrupt"):
        load_manifest(p.dir)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda m: m["files"][next(iter(m["files"]))].pop("sha256"), r"'files\..*\.sha256' is missing"),
    (lambda m: m["splits"]["train"].update(tokens="many"), r"'splits\.train\.tokens' is not valid"),
    (lambda m: m["splits"]["train"]["arrays"]["input_ids"]["shards"][0].update(rows=-1),
     r"'splits\.train\.arrays\.input_ids\.shards\.0\.rows' is not valid"),
    (lambda m: m.pop("splits"), r"'splits' is missing"),
])
def test_a_manifest_with_a_missing_or_mistyped_field_names_it(root: Path, files_recipe: dict[str, Any],
                                                              edit: Any, message: str) -> None:
    """Read through its typed record: a damaged manifest is reported at once, naming the field and
    the fix, not as a KeyError in the middle of staging or training."""
    p = prepare(load_recipe(files_recipe))
    m = json.loads(p.manifest_path.read_text())
    edit(m)
    p.manifest_path.write_text(json.dumps(m))
    with pytest.raises(DataError, match=message + r".*prepare RECIPE --force"):
        load_manifest(p.dir)


def test_resolve_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    r = load_recipe(TINY_CAUSAL)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "5")
    assert cache.resolve_workers(3, r) == 3
    assert cache.resolve_workers(None, load_recipe(TINY_CAUSAL, ["data.workers=4"])) == 4
    assert cache.resolve_workers(None, r) == 5
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert cache.resolve_workers(None, r) == len(os.sched_getaffinity(0))


# -- processes: SIGKILL mid-way, two prepares racing ---------------------------------------------

PREP_SCRIPT = textwrap.dedent("""
    import json, logging, sys
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from clustertune.recipe import load_recipe
    from clustertune.data.cache import prepare
    p = prepare(load_recipe(json.loads(sys.argv[1])), workers=1)
    print(json.dumps({"fp": p.fingerprint, "hit": p.hit}))
""")


def _prep_proc(recipe: dict[str, Any], env: dict[str, str], stderr: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PREP_SCRIPT, json.dumps(recipe)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=stderr, env={**os.environ, **env})


def _wait_for(cond: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_sigkill_mid_prepare_leaves_nothing_complete(root: Path, files_recipe: dict[str, Any]) -> None:
    fingerprint_of(load_recipe(files_recipe))  # tokenizer cached: the kill lands in the data build
    proc = _prep_proc(files_recipe, {"CLUSTERTUNE_FAULT_PREPARE": "after-shards"})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -9, err
    fp_ = fp(files_recipe)
    assert not (root / fp_).exists()  # nothing that looks complete
    assert list(root.glob(f".tmp-{fp_}-*"))  # the half-written build is there, under its temp name
    p = prepare(load_recipe(files_recipe))
    assert not p.hit and not list(root.glob(f".tmp-{fp_}-*"))  # rebuilt cleanly, leftovers removed
    load_manifest(p.dir).verify()


def test_two_racing_prepares_build_once(root: Path, files_recipe: dict[str, Any], tmp_path: Path) -> None:
    fp_ = fp(files_recipe)  # tokenizer cached: both race on the data build
    release = tmp_path / "release"
    env = {"CLUSTERTUNE_FAULT_PREPARE": f"hold:{release}"}
    first = _prep_proc(files_recipe, env)
    lock = root / f".{fp_}.lock"
    _wait_for(lambda: lock.is_file() and "pid" in lock.read_text(), "the first prepare to take the lock")
    log2 = tmp_path / "second.log"
    with log2.open("w") as fh:
        second = _prep_proc(files_recipe, env, stderr=fh)
        _wait_for(lambda: "waiting for another prepare" in log2.read_text(), "the second prepare to wait")
        release.touch()
        results = []
        for p in (first, second):
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err or log2.read_text()
            results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["fp"] == results[1]["fp"] == fp_
    assert [r["hit"] for r in results] == [False, True]  # one build; the other waited, then read it
    load_manifest(root / fp_).verify()


def test_loader_reads_mapped_shards_like_memory_and_resumes_at_another_world_size(
        root: Path, files_recipe: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from clustertune.data.loader import Position, TrainBatches, to_batch
    from clustertune.data.prepare import Arrays

    monkeypatch.setenv("CLUSTERTUNE_SHARD_BYTES", "2048")
    mapped = prepare(load_recipe(files_recipe)).open_split("train")
    memory = Arrays(input_ids=np.asarray(mapped.input_ids))
    one = TrainBatches(mapped, 4, 1, 0, 1, seed=3, shuffle=True)
    ref = TrainBatches(memory, 4, 1, 0, 1, seed=3, shuffle=True)
    pos = Position()
    for _ in range(5):
        (idx,), pos = one.step_indices(pos)
        assert torch.equal(to_batch(mapped, idx, torch.device("cpu"))["input_ids"],
                           to_batch(memory, idx, torch.device("cpu"))["input_ids"])
    # The saved position (global samples) continues at world size 2 with the very next samples.
    saved = Position.from_dict(pos.to_dict())
    (nxt,), _ = ref.step_indices(saved)
    halves = [TrainBatches(mapped, 2, 1, r, 2, seed=3, shuffle=True).step_indices(saved)[0][0] for r in range(2)]
    assert sorted(np.concatenate(halves).tolist()) == sorted(nxt.tolist())


def test_cache_rm_removes_only_prepared_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from clustertune.cli.main import main

    root = tmp_path / "cache"
    mine = root / "Documents"
    mine.mkdir(parents=True)
    (mine / "thesis.txt").write_text("a user's file")
    (root / "Downloads").mkdir()
    (root / "Downloads" / "manifest.json").write_text('{"format": 1, "fingerprint": "other", "files": {}, "splits": {}}')
    for prefix in ("Doc", "Down", "D"):
        assert main(["cache", "rm", prefix, "--cache-dir", str(root)]) == 2
        err = capsys.readouterr().err
        assert "no prepared data" in err and "left alone" in err and "Traceback" not in err
    assert (mine / "thesis.txt").read_text() == "a user's file" and (root / "Downloads" / "manifest.json").is_file()
