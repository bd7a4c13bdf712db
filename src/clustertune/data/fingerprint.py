"""What identifies prepared data, and nothing else: the fingerprint.

The fingerprint is the sha256 of a canonical JSON of its inputs:

- the source: builtin corpus name and version; local files by content (sha256, memoised by
  path, size, mtime and inode so an unchanged file is never re-read); a ``save_to_disk``
  directory by the content of its files; a hub dataset by name, config and the revision
  resolved to a commit (asked of the hub when online, read from the local snapshot offline,
  so both give the same fingerprint);
- how examples are picked from it: splits, columns, and the validation carve-out (fraction and
  seed) when one is carved;
- the tokenizer's content (vocabulary, merges, normalizer, pre-tokenizer, post-processor,
  special tokens), never its class name or where it was loaded from;
- the task, block size, packing and truncation settings, sample limits, and
  :data:`FORMAT_VERSION`.

Learning rate, batch size, model and every other setting leave it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from clustertune.data import builtin
from clustertune.data.source_checks import dataset_path_error, not_a_file
from clustertune.errors import DataError
from clustertune.fsutil import atomic_write_json, canonical_json, digest, sha256_file, xxh3_file
from clustertune.models.tokenizer import TOKENIZER_FORMAT, tokenizer_content_hash
from clustertune.recipe.data_schema import DataSection
from clustertune.data.shapes import shape_of
from clustertune.recipe.schema import Recipe

# Re-exported: the prepared-data code names these as part of what a fingerprint is made of.
__all__ = ["FORMAT_VERSION", "TOKENIZER_FORMAT", "canonical_json", "digest", "fingerprint", "sha256_file",
           "tokenizer_content_hash", "xxh3_file"]

# Bump when the bytes prepare writes for the same inputs change (tokenization, packing, layout).
FORMAT_VERSION = 2  # 2: .txt lines keep their line breaks; the carve-out has its own seed


class HashMemo:
    """Content hashes of local files, memoised by (path, size, mtime_ns, inode).

    One small JSON file per path under ``<cache_root>/.memo/``, replaced atomically, so
    concurrent prepares never corrupt it. A file whose stat changed is hashed again.
    """

    def __init__(self, root: Path | None):
        self.dir = root / ".memo" if root is not None else None
        self.hashed: list[str] = []  # paths actually read (tests check unchanged files are not)

    def sha256(self, path: Path) -> str:
        p = path.resolve()
        st = p.stat()
        key = {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
        entry = self.dir / f"{hashlib.sha1(str(p).encode()).hexdigest()}.json" if self.dir else None
        if entry is not None and entry.is_file():
            try:
                saved = json.loads(entry.read_text(encoding="utf-8"))
                if {k: saved.get(k) for k in key} == key:
                    return str(saved["sha256"])
            except (OSError, ValueError, KeyError):
                pass
        value = sha256_file(p)
        self.hashed.append(str(p))
        if entry is not None:
            try:
                entry.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_json(entry, {**key, "sha256": value}, indent=None)
            except OSError:
                pass  # a read-only cache still works, it just re-hashes
        return value


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()
    return home / "hub"


def local_snapshot_commit(repo_type: str, name: str, revision: str | None) -> str | None:
    """The commit a local Hugging Face snapshot of ``name`` at ``revision`` holds, if any."""
    rev = revision or "main"
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        return rev
    repo = _hub_cache() / f"{repo_type}s--{name.replace('/', '--')}"
    try:
        return (repo / "refs" / rev).read_text(encoding="utf-8").strip() or None
    except OSError:
        pass
    # datasets downloads into snapshots/<commit> without writing refs/: one snapshot is unambiguous.
    snaps = [p.name for p in (repo / "snapshots").iterdir()] if (repo / "snapshots").is_dir() else []
    if revision is None and len(snaps) == 1:
        return snaps[0]
    return None


def hub_dataset_commit(name: str, revision: str | None) -> str:
    """``revision`` of hub dataset ``name`` resolved to a commit sha, online or offline."""
    if not _hub_offline():
        try:
            from huggingface_hub import HfApi

            sha = HfApi().dataset_info(name, revision=revision).sha
            if sha:
                return str(sha)
        except Exception:  # unreachable hub: the local snapshot decides, as offline
            pass
    sha = local_snapshot_commit("dataset", name, revision)
    if sha is None:
        raise DataError(
            f"data.dataset: cannot resolve {name!r} at revision {revision or 'main'!r} to a commit: the hub "
            "is not reachable (or HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set) and there is no local snapshot. "
            f"Run `clustertune fetch RECIPE` on a machine with internet, or `datasets.load_dataset({name!r})"
            ".save_to_disk(DIR)` there and set data.dataset=DIR"
        )
    return sha


def _files_identity(files: list[str], key: str, memo: HashMemo) -> list[dict[str, str]]:
    out = []
    for f in files:
        p = Path(f).expanduser()
        if not p.is_file():
            raise DataError(not_a_file(p, key))
        # The suffix decides how the file is parsed; the path itself is not part of the identity.
        out.append({"suffix": p.suffix.lower(), "sha256": memo.sha256(p)})
    return out


def _dir_identity(root: Path, memo: HashMemo) -> list[dict[str, str]]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("cache-"))
    return [{"file": str(p.relative_to(root)), "sha256": memo.sha256(p)} for p in files]


def source_identity(d: DataSection, memo: HashMemo) -> dict[str, Any]:
    """What the raw examples are, computed without reading them (files are hashed, memoised)."""
    if d.train_files:
        ident: dict[str, Any] = {"kind": "files", "train": _files_identity(d.train_files, "data.train_files", memo)}
        if d.validation_files:
            ident["validation"] = _files_identity(d.validation_files, "data.validation_files", memo)
        return ident
    name = d.dataset or ""
    if name.startswith(builtin.BUILTIN_PREFIX):
        return {"kind": "builtin", "name": builtin.short_name(name), "version": builtin.corpus_version()}
    p = Path(name).expanduser()
    if p.is_dir():
        return {"kind": "disk", "files": _dir_identity(p, memo)}
    if name.startswith(("/", "./", "../", "~")):
        raise dataset_path_error(name)
    return {"kind": "hub", "name": name, "config": d.dataset_config,
            "commit": hub_dataset_commit(name, d.dataset_revision)}


def selection_identity(recipe: Recipe, carved: bool | None) -> dict[str, Any]:
    """Which examples of the source are used (splits, columns, carve-out)."""
    d = recipe.data
    sel: dict[str, Any] = {"train_split": d.train_split, "validation_split": d.validation_split,
                           "text_column": d.text_column}
    sel.update(shape_of(recipe).selection(recipe))  # a label column, and which id each label gets
    # Files without validation files are always carved; other sources only when they lack the
    # validation split, which is known once loaded (``carved=None`` keeps both settings in).
    if carved is not False:
        sel["carve"] = {"fraction": d.validation_fraction, "how": d.validation_carve,
                        **({"seed": d.split_seed} if d.validation_carve == "random" else {})}
    return sel


def corpus_identity(recipe: Recipe, memo: HashMemo) -> dict[str, Any]:
    """Source plus selection: what a tokenizer trained on the spot is trained on."""
    d = recipe.data
    carved: bool | None = None
    if d.streaming:
        carved = False  # streaming never carves (the recipe checks it has a validation split)
    elif d.train_files:
        carved = not d.validation_files
    elif (d.dataset or "").startswith(builtin.BUILTIN_PREFIX):
        carved = True
    elif d.dataset and Path(d.dataset).expanduser().is_dir():
        splits_file = Path(d.dataset).expanduser() / "dataset_dict.json"
        try:
            carved = d.validation_split not in json.loads(splits_file.read_text(encoding="utf-8")).get("splits", [])
        except (OSError, ValueError):
            carved = True  # a single Dataset has no splits
    return {"source": source_identity(d, memo), "selection": selection_identity(recipe, carved)}


def processing_identity(recipe: Recipe) -> dict[str, Any]:
    d = recipe.data
    proc = shape_of(recipe).processing(recipe)
    if d.streaming:
        proc["streaming"] = True  # only the validation split is prepared
    proc["max_train_samples"] = d.max_train_samples
    proc["max_eval_samples"] = d.max_eval_samples
    if d.max_train_samples or d.max_eval_samples:
        proc["sample_selection"] = d.sample_selection
        if d.sample_selection == "shuffled":
            proc["sample_seed"] = d.sample_seed
    proc["keep_linebreaks"] = d.keep_linebreaks  # .txt files
    return proc


def fingerprint_inputs(recipe: Recipe, corpus: dict[str, Any], tokenizer_sha256: str) -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "task": recipe.task,
        "corpus": corpus,
        "tokenizer": tokenizer_sha256,
        "processing": processing_identity(recipe),
    }


def fingerprint(inputs: dict[str, Any]) -> str:
    return digest(inputs, 20)
