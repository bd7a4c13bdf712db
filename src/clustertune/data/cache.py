"""Prepare data once: a content-addressed, locked, atomic cache of tokenized data.

``prepare(recipe)`` computes the fingerprint without reading the raw examples (local files are
hashed once and memoised; a tokenizer trained on the spot is looked up in its own cache), and
returns ``<cache_root>/<fingerprint>/`` when it is there: a hit checks the manifest and the
file sizes only, well under a second whatever the corpus size. On a miss it takes a file lock
for that fingerprint (concurrent prepares of it build once; the others wait, then read the
result), tokenizes into a temporary directory and renames it into place when complete, so a
crash at any moment leaves nothing that looks complete and the next prepare rebuilds cleanly.

What the data becomes is its shape's (:mod:`clustertune.data.shapes`, named by the task's
traits): its part of the fingerprint, the build and how a split opens again. This module
identifies, locks, has the shape build, and writes the manifest.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clustertune.data.fingerprint import (
    HashMemo,
    digest,
    corpus_identity,
    fingerprint,
    fingerprint_inputs,
    tokenizer_content_hash,
)
from clustertune.fsutil import atomic_write_json, file_lock, fsync_all, fsync_dir, replace_dir
from clustertune.data.manifest import (
    MANIFEST,
    MANIFEST_FORMAT,
    TOKENIZER_DIR,
    Manifest,
    MappedArrays,
    add_files,
    load_manifest,
    write_manifest,
)
from clustertune.data.prepare import column
from clustertune.data.shapes import BuildJob, open_split, shape_of
from clustertune.data.sources import (
    RawData,
    load_raw,
)
from clustertune.errors import DataError
from clustertune.recipe.schema import TOKENIZER_TRAIN, Recipe
from clustertune.models.local import hub_options
from clustertune.models.tokenizer import cached_trained_tokenizer, fix_pad_token, load_tokenizer
from clustertune.data.truncation import check_truncation
from clustertune.data.stream import texts_of_source

log = logging.getLogger("clustertune")

CACHE_ENV = "CLUSTERTUNE_CACHE"
# Fault injection for tests: SIGKILL the preparing process after its shards are written and
# before the manifest ("after-shards"), or hold the lock until file PATH exists ("hold:PATH").
FAULT_ENV = "CLUSTERTUNE_FAULT_PREPARE"


@contextmanager
def log_to_stderr() -> Iterator[None]:
    """Show clustertune's INFO lines on stderr for the block (waiting for a lock, training a
    tokenizer, preparing) where nothing else shows them yet (before a run has its log)."""
    lg = logging.getLogger("clustertune")
    if lg.handlers:
        yield
        return
    h = logging.StreamHandler(sys.stderr)
    h.setLevel(logging.INFO)
    h.setFormatter(logging.Formatter("%(message)s"))
    old_level = lg.level
    if lg.level == logging.NOTSET or lg.level > logging.INFO:
        lg.setLevel(logging.INFO)
    lg.addHandler(h)
    try:
        yield
    finally:
        lg.removeHandler(h)
        lg.setLevel(old_level)


def cache_root(recipe: Recipe | None = None, override: str | os.PathLike[str] | None = None) -> Path:
    """The argument, else ``data.cache_dir``, else ``$CLUSTERTUNE_CACHE``, else the user cache dir."""
    configured = override or (recipe.data.cache_dir if recipe is not None else None) or os.environ.get(CACHE_ENV)
    if configured:
        return Path(os.path.expandvars(str(configured))).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "clustertune").resolve()


def resolve_workers(cli: int | None, recipe: Recipe) -> int:
    """Tokenizing processes: the flag, else the recipe, else SLURM_CPUS_PER_TASK, else the CPU affinity mask."""
    if cli:
        return int(cli)
    if recipe.data.workers:
        return int(recipe.data.workers)
    env = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class PreparedDataset:
    """A complete prepared-data directory, as ``prepare`` found or built it."""

    fingerprint: str
    dir: Path
    manifest: Manifest
    hit: bool
    seconds: float

    @property
    def manifest_path(self) -> Path:
        return self.dir / MANIFEST

    @property
    def tokenizer_dir(self) -> Path:
        return self.dir / TOKENIZER_DIR

    @property
    def total_bytes(self) -> int:
        return self.manifest.total_bytes

    @property
    def streaming(self) -> bool:
        return self.manifest.record.streaming

    def counts(self, split: str) -> dict[str, int]:
        if split not in self.manifest.record.splits:  # the streamed training split
            return {"examples": 0, "samples": 0, "tokens": 0}
        s = self.manifest.split(split)
        return {"examples": s.examples or 0, "samples": s.samples or 0, "tokens": s.tokens}

    def open_split(self, split: str) -> MappedArrays:
        return open_split(self.manifest, split)

    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.tokenizer_dir))


class _LazyRaw:
    """The raw examples, loaded at most once and only when something needs them (a miss)."""

    def __init__(self, recipe: Recipe):
        self.recipe = recipe
        self._raw: RawData | None = None

    def get(self) -> RawData:
        if self._raw is None:
            t0 = time.perf_counter()
            self._raw = load_raw(self.recipe.data, self.recipe.train.seed,
                                 check_text=shape_of(self.recipe).reads_text_column)
            log.debug("data: loaded the raw examples in %.1fs", time.perf_counter() - t0)
        return self._raw

    def train_texts(self) -> Iterable[str]:
        if self.recipe.data.streaming:  # read lazily, never whole
            return (x for x in texts_of_source(self.recipe.data)() if isinstance(x, str))
        return [x for x in column(self.get().train, self.recipe.data.text_column) if isinstance(x, str)]


@dataclass
class _Tokenizer:
    sha256: str
    dir: Path | None = None
    obj: Any = None
    key: str = "model.tokenizer"
    options: dict[str, Any] = field(default_factory=dict)  # from_pretrained's (trust_remote_code)

    def load(self) -> Any:
        if self.obj is None:
            self.obj = fix_pad_token(load_tokenizer(str(self.dir), key=self.key, **self.options))
        return self.obj


# Files that can hold a tokenizer's content (weights never do): what a local tokenizer
# directory's memoised identity is computed from.
_TOKENIZER_SUFFIXES = {".json", ".txt", ".model", ".jinja", ".tiktoken", ".vocab", ".spm"}


def _resolve_tokenizer(recipe: Recipe, root: Path, corpus: dict[str, Any], raw: _LazyRaw, memo: HashMemo) -> _Tokenizer:
    """The tokenizer and its content hash. A local directory's hash is memoised by its files'
    hashes (themselves memoised by stat), so a cache hit need not load transformers."""

    m, d = recipe.model, recipe.data
    source = m.tokenizer or m.name_or_path or ""
    if source == TOKENIZER_TRAIN:
        tdir, sha = cached_trained_tokenizer(
            root, corpus, raw.train_texts, m.tokenizer_vocab_size,
            classification=shape_of(recipe).classifier_tokens,
            model_max_length=max(d.block_size, d.max_length),
        )
        return _Tokenizer(sha, tdir)
    local = Path(source).expanduser()
    if local.is_dir():
        files = sorted(f for f in local.iterdir() if f.is_file() and f.suffix in _TOKENIZER_SUFFIXES)
        key = digest([[f.name, memo.sha256(f)] for f in files], 32)
        entry = root / ".memo" / f"tokenizer-{key}.json"
        try:
            return _Tokenizer(str(json.loads(entry.read_text(encoding="utf-8"))["sha256"]), local, options=hub_options(m, source))
        except (OSError, ValueError, KeyError):
            pass
        tok = _Tokenizer("", local, key="model.tokenizer" if m.tokenizer else "model.name_or_path",
                         options=hub_options(m, source))
        tok.sha256 = tokenizer_content_hash(tok.load())
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(entry, {"dir": str(local.resolve()), "sha256": tok.sha256}, indent=None)
        except OSError:
            pass
        return tok
    # Without model.tokenizer the tokenizer comes from name_or_path: name the key the user set.
    tok = fix_pad_token(load_tokenizer(source, key="model.tokenizer" if m.tokenizer else "model.name_or_path",
                                       **hub_options(m, source)))
    return _Tokenizer(tokenizer_content_hash(tok), None, tok)


def _existing(final: Path, fp: str) -> Manifest | None:
    """The complete entry at ``final`` (manifest + sizes checked), None if absent; DataError if damaged."""
    if not final.is_dir():
        return None
    man = load_manifest(final)
    if man.fingerprint != fp:
        raise DataError(f"prepared data {final}: its manifest is for fingerprint {man.fingerprint}, not {fp}; "
                        f"remove it (`clustertune cache rm {final.name}`)")
    man.check_sizes()
    return man


def _fault(stage: str) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    if spec == stage == "after-shards":
        os.kill(os.getpid(), signal.SIGKILL)
    if stage == "locked" and spec.startswith("hold:"):
        release = Path(spec.split(":", 1)[1])
        deadline = time.monotonic() + 120
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def _clean_stale(root: Path, fp: str) -> None:
    """Remove what crashed builds of ``fp`` left (called with its lock held: no one else builds it)."""
    for p in list(root.glob(f".tmp-{fp}-*")) + list(root.glob(f".old-{fp}-*")) + list(root.glob(f".{fp}.*.old")):
        log.info("removing %s, left by an interrupted prepare", p)
        shutil.rmtree(p, ignore_errors=True)


def _identify(recipe: Recipe, root: Path) -> tuple[str, dict[str, Any], _Tokenizer, _LazyRaw]:
    shape = shape_of(recipe)
    memo = HashMemo(root)
    corpus = corpus_identity(recipe, memo)
    raw = _LazyRaw(recipe)
    tok = _resolve_tokenizer(recipe, root, corpus, raw, memo)
    inputs = fingerprint_inputs(recipe, corpus, tok.sha256)
    inputs.update(shape.tokenizer_inputs(recipe, tok.load))
    return fingerprint(inputs), inputs, tok, raw


def fingerprint_of(recipe: Recipe, cache_dir: str | os.PathLike[str] | None = None) -> tuple[str, dict[str, Any]]:
    """The recipe's data fingerprint and its inputs, without preparing (a tokenizer trained on
    the spot is trained, and cached, when it is not cached yet)."""
    root = cache_root(recipe, cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    fp, inputs, _, _ = _identify(recipe, root)
    return fp, inputs


def prepare(recipe: Recipe, workers: int | None = None, force: bool = False, *,
            cache_dir: str | os.PathLike[str] | None = None) -> PreparedDataset:
    """The recipe's data, prepared in its shape once into the content-addressed cache."""
    t0 = time.perf_counter()
    root = cache_root(recipe, cache_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = "--cache-dir" if cache_dir is not None else "data.cache_dir (or $CLUSTERTUNE_CACHE)"
        raise DataError(f"data.cache_dir: cannot create the cache directory {root}: {exc.strerror or exc}; "
                        f"set {where} to a directory you can write") from exc
    fp, inputs, tok, raw = _identify(recipe, root)
    final = root / fp

    def found(man: Manifest, hit: bool) -> PreparedDataset:
        return PreparedDataset(fp, final, man, hit, time.perf_counter() - t0)

    if not force and (man := _existing(final, fp)) is not None:
        _recheck(recipe, man)
        return found(man, True)
    with file_lock(root / f".{fp}.lock", f"another prepare of {fp}"):
        if not force and (man := _existing(final, fp)) is not None:
            _recheck(recipe, man)
            return found(man, True)  # built by the process we waited for
        _fault("locked")
        _clean_stale(root, fp)
        tmp = root / f".tmp-{fp}-{os.getpid()}"
        tmp.mkdir()
        try:
            n = resolve_workers(workers, recipe)
            _build(recipe, tmp, tok, raw, n, inputs, fp)
            replace_dir(tmp, final)  # --force, or a damaged entry: the old one goes once the new is in
            fsync_dir(root)  # the rename itself survives a crash of the machine
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    res = found(load_manifest(final), False)
    log.info("data: prepared %s in %.1fs (%d workers)", fp, res.seconds, n)
    return res


def _recheck(recipe: Recipe, man: Manifest) -> None:
    """The checks of the recipe's own keys on what an entry recorded when it was built (the
    share cut at max_length: the entry may have been built with data.truncation=allow)."""
    for name, split in man.record.splits.items():
        if split.examples_read is not None:
            check_truncation(recipe, name, split.model_dump())


def _build(recipe: Recipe, out: Path, tok: _Tokenizer, raw: _LazyRaw, workers: int,
           inputs: dict[str, Any], fp: str) -> None:
    import tokenizers
    import transformers

    t0 = time.perf_counter()
    tk = tok.load()
    job = BuildJob(recipe, out, tk, raw.get, workers)
    built = shape_of(recipe).build(job)
    splits, files, unsynced, t_write = built.splits, job.files, job.unsynced, built.write_seconds
    t_tok = time.perf_counter() - t0 - t_write
    _fault("after-shards")
    tk.save_pretrained(str(out / TOKENIZER_DIR))
    add_files(out, Path(TOKENIZER_DIR), files, unsynced)
    fsync_all(unsynced)  # every file on disk before the manifest that makes the entry complete
    timing = {"total": time.perf_counter() - t0, "tokenize": t_tok, "write": t_write}
    manifest = {
        "format": MANIFEST_FORMAT,
        "fingerprint": fp,
        "task": recipe.task,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "created_by": {"host": socket.gethostname(), "pid": os.getpid(), "workers": workers,
                       "tokenizers": tokenizers.__version__, "transformers": transformers.__version__},
        "seconds": {k: round(v, 3) for k, v in timing.items()},
        "vocab_size": len(tk),
        "dtype": splits["validation"]["arrays"]["input_ids"]["dtype"],
        "streaming": bool(recipe.data.streaming),
        "tokenizer": {"dir": TOKENIZER_DIR, "sha256": tok.sha256},
        "inputs": inputs,
        "splits": splits,
        "files": files,
        **built.manifest,
    }
    write_manifest(out, manifest)
