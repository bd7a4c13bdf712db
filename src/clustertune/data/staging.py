"""The node side of prepared data: the run directory's data reference, staging, opening.

The submitting side (``clustertune.api.run``) prepares the data and writes into the run
directory what the nodes need: ``data.json`` (fingerprint, the prepared directory, its
manifest) and ``tokenizer/``. A node never tokenizes and never reads raw data: it calls
:func:`open_run_data`, which optionally stages the prepared files to node-local disk (once per
node: local rank 0 copies and verifies, the other local ranks wait on a marker file; no
``torch.distributed`` involved, so it works before any process group exists) and returns
memory-mapped train and eval arrays.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.data.cache import PreparedDataset
from clustertune.fsutil import atomic_write_bytes, atomic_write_json, atomic_write_text, file_lock, fsync_file, replace_dir, sha256_file, temp_sibling
from clustertune.data.manifest import MANIFEST, Manifest, MappedArrays, file_matches, force_hint, load_manifest
from clustertune.data.manifest_records import FileEntry
from clustertune.data.shapes import open_split
from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths
from clustertune.runs.records import DataRef
from clustertune.data.stream import BlockStream, texts_of_source

log = logging.getLogger("clustertune")

STAGE_TOKEN_ENV = "CLUSTERTUNE_STAGE_TOKEN"
# Seconds between a long copy's progress lines.
PROGRESS_SECONDS = 10.0
STAGE_TIMEOUT_ENV = "CLUSTERTUNE_STAGE_TIMEOUT"


# -- the run directory's reference to its prepared data -----------------------------------------


def write_run_data(prepared: PreparedDataset, paths: RunPaths) -> DataRef:
    """Record ``prepared`` in the run directory and copy its tokenizer to ``paths.tokenizer``."""
    ref = DataRef(
        fingerprint=prepared.fingerprint, dir=str(prepared.dir), manifest=str(prepared.manifest_path),
        manifest_sha256=sha256_file(prepared.manifest_path), total_bytes=prepared.total_bytes,
        task=prepared.manifest.record.task, splits={s: prepared.counts(s) for s in ("train", "validation")},
        labels=prepared.manifest.record.labels,
    )
    atomic_write_json(paths.data, ref.to_json())
    if not paths.has_tokenizer:
        ttmp = temp_sibling(paths.tokenizer)
        shutil.rmtree(ttmp, ignore_errors=True)
        shutil.copytree(prepared.tokenizer_dir, ttmp)
        replace_dir(ttmp, paths.tokenizer)
    return ref


def read_run_data(paths: RunPaths) -> DataRef:
    p = paths.data
    try:
        return DataRef.model_validate_json(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"run directory {paths.root} has no {p.name}: its data was never prepared "
            "(`clustertune run` prepares it before training starts)"
        ) from None
    except ValueError as exc:
        raise DataError(f"{p} is corrupt: {exc}") from exc


# -- staging -----------------------------------------------------------------------------------


@dataclass
class StageResult:
    dir: Path
    files: int
    copied_files: int
    copied_bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.copied_bytes / 1e6 / max(self.seconds, 1e-9)


def resolve_stage_root(spec: str, job: str | None = None) -> Path:
    """``spec`` with environment variables expanded here (on the node). A variable that is unset
    gives a per-job directory under this node's temporary directory instead (logged)."""
    expanded = os.path.expandvars(os.path.expanduser(spec))
    if "$" in expanded:
        missing = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expanded)
        job = job or os.environ.get("SLURM_JOB_ID") or str(os.getppid())
        fallback = Path(tempfile.gettempdir()) / f"clustertune-stage-{job}"
        log.info("data.stage_to: %s is not set on this node; staging to %s", ", ".join(f"${m}" for m in missing), fallback)
        return fallback
    return Path(expanded)


def _copy_checked(src: Path, dst: Path, want: FileEntry) -> tuple[str, bool]:
    """Copy ``src`` to ``dst`` durably and check the bytes that landed against ``want``.

    The copy itself is the kernel's (``shutil.copyfile`` uses sendfile, no trip through user
    space), like ``cp``; the check then reads ``dst`` back from the page cache, so it verifies
    what was written rather than what was read. fsync last, so the disk write-back is not
    waited for twice.
    """
    shutil.copyfile(src, dst)
    if dst.stat().st_size != want.bytes:
        return "size", False
    kind, ok = file_matches(dst, want)
    fsync_file(dst)
    return kind, ok


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _valid_copy(path: Path, want: FileEntry) -> bool:
    try:
        return path.stat().st_size == want.bytes and file_matches(path, want)[1]
    except OSError:
        return False


def stage(source: Path, dest_root: Path) -> StageResult:
    """Copy exactly the files of prepared directory ``source`` to ``dest_root/<fingerprint>/``.

    Files already there with the right size and checksum are kept; every copied file is
    checked against the manifest once it is written (XXH3-128, or sha256 for entries without it) (a mismatch means the shared copy is corrupt, and the
    error names it). The manifest is copied last, so a staged directory with a manifest is
    complete. Concurrent stagers of the same data on one node copy once (file lock).
    """
    man = load_manifest(source)
    fp = man.fingerprint
    try:
        dest_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"stage destination {dest_root} cannot be created: {exc.strerror or exc}") from exc
    if not os.access(dest_root, os.W_OK | os.X_OK):
        raise DataError(f"stage destination {dest_root} is not writable; point data.stage_to (or DEST) elsewhere")
    dest = dest_root / fp
    t0 = time.perf_counter()
    log.info("data: staging %s to %s (%d files, %.1f MB; what an earlier copy there holds is checked, not copied)",
             fp, dest, len(man.files), man.total_bytes / 1e6)
    with file_lock(dest_root / f".{fp}.lock", f"the staging of {fp} to {dest_root}"):
        dest.mkdir(exist_ok=True)
        with ThreadPoolExecutor(min(_workers(), max(1, len(man.files)))) as pool:
            valid = list(pool.map(lambda item: _valid_copy(dest / item[0], item[1]), man.files.items()))
        todo = {n: w for (n, w), ok in zip(man.files.items(), valid) if not ok}
        need = sum(w.bytes for w in todo.values())
        free = shutil.disk_usage(dest_root).free
        if need > free:
            raise DataError(
                f"stage destination {dest_root} has {free / 1e6:.1f} MB free; this run's data needs "
                f"{need / 1e6:.1f} MB more ({len(todo)} files of {man.total_bytes / 1e6:.1f} MB in all); "
                "free space there or point data.stage_to elsewhere"
            )
        (dest / MANIFEST).unlink(missing_ok=True)  # incomplete until the manifest is back
        def copy_one(name: str) -> None:
            want = todo[name]
            src, dst = source / name, dest / name
            if not src.is_file():
                raise DataError(f"prepared data {source}: file {src} is missing; {force_hint(fp)}")
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                kind, ok = _copy_checked(src, tmp, want)
                if not ok:
                    raise DataError(
                        f"prepared data {source}: checksum error in {src} (its {kind} differs from "
                        f"{source / MANIFEST}); {force_hint(fp)}"
                    )
                os.replace(tmp, dst)
            finally:
                tmp.unlink(missing_ok=True)

        # Largest first, several files at once: one file's check overlaps another's copy.
        order = sorted(todo, key=lambda n: -todo[n].bytes)
        with ThreadPoolExecutor(min(_workers(), max(1, len(order)))) as pool:
            pending = {pool.submit(copy_one, n): todo[n].bytes for n in order}
            copied = 0
            while pending:
                # A large copy says how far it is every so often: no silent minutes.
                done, _ = futures_wait(pending, timeout=PROGRESS_SECONDS, return_when=FIRST_EXCEPTION)
                for fut in done:
                    fut.result()
                    copied += pending.pop(fut)
                if pending:
                    log.info("data: staging %s: %.1f of %.1f MB copied (%d files to go)", fp, copied / 1e6,
                             need / 1e6, len(pending))
        atomic_write_bytes(dest / MANIFEST, (source / MANIFEST).read_bytes())
    res = StageResult(dest, len(man.files), len(todo), need, time.perf_counter() - t0)
    log.info("data: staged %s to %s: %.1f MB copied (%d of %d files; the rest were there and valid) "
             "in %.2fs, %.0f MB/s", fp, dest, need / 1e6, len(todo), len(man.files), res.seconds, res.mb_per_s)
    return res


def _default_token(paths: RunPaths) -> str:
    """Identifies this launch on this node, so waiting ranks never trust a marker of an earlier one."""
    env = os.environ
    if env.get(STAGE_TOKEN_ENV):
        return env[STAGE_TOKEN_ENV]
    parts = [env.get(k, "") for k in ("SLURM_JOB_ID", "SLURM_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")]
    return "|".join([str(paths.root), *parts])


def _marker(dest_root: Path, fp: str, token: str, kind: str) -> Path:
    return dest_root / f".{fp}.{kind}-{hashlib.sha1(token.encode()).hexdigest()[:16]}"


def stage_once_per_node(source: Path, dest_root: Path, local_rank: int, token: str,
                        timeout: float | None = None) -> Path:
    """Local rank 0 stages and writes a ready marker (or a failed one); other local ranks wait for it."""
    fp = load_manifest(source).fingerprint
    ready, failed = _marker(dest_root, fp, token, "ready"), _marker(dest_root, fp, token, "failed")
    if local_rank == 0:
        try:
            res = stage(source, dest_root)
        except BaseException as exc:
            try:
                dest_root.mkdir(parents=True, exist_ok=True)
                atomic_write_text(failed, str(exc) or type(exc).__name__)  # whole, for the waiting ranks
            except OSError:
                pass
            raise
        failed.unlink(missing_ok=True)
        atomic_write_text(ready, str(res.dir))
        return res.dir
    limit = timeout if timeout is not None else float(os.environ.get(STAGE_TIMEOUT_ENV, "3600"))
    deadline = time.monotonic() + limit
    while not ready.is_file():
        if failed.is_file():
            raise DataError(f"staging on this node failed in local rank 0: {failed.read_text(encoding='utf-8')}")
        if time.monotonic() > deadline:
            raise DataError(
                f"local rank {local_rank} waited {limit:.0f}s for local rank 0 to stage {fp} to {dest_root} "
                f"(marker {ready}); is local rank 0 running on this node? ({STAGE_TIMEOUT_ENV} sets the wait)"
            )
        time.sleep(0.1)
    return dest_root / fp


def verify_once_per_node(man: Manifest, paths: RunPaths, local_rank: int, token: str,
                         timeout: float | None = None) -> None:
    """Check the checksums of prepared data read in place before its first use in this launch:
    local rank 0 of each node reads every file once (its pages then serve training), the other
    local ranks wait for its verdict, as staging does; a later launch checks again."""
    ok = paths.root / f".data-verified-{hashlib.sha1(token.encode()).hexdigest()[:16]}"
    bad = ok.with_name(ok.name.replace("verified", "corrupt"))
    if ok.is_file():
        return
    if local_rank == 0:
        t0 = time.perf_counter()
        try:
            man.check_checksums()
        except DataError as exc:
            # Whole or absent (written aside, then renamed): a waiting rank that saw a half-written
            # verdict would report an empty error instead of the checksum that failed.
            atomic_write_text(bad, str(exc))
            raise
        atomic_write_text(ok, man.fingerprint)
        log.info("data: checked %d files (%.1f MB) of %s in %.2fs", len(man.files), man.total_bytes / 1e6,
                 man.fingerprint, time.perf_counter() - t0)
        return
    limit = timeout if timeout is not None else float(os.environ.get(STAGE_TIMEOUT_ENV, "3600"))
    deadline = time.monotonic() + limit
    while not ok.is_file():
        if bad.is_file():
            raise DataError(bad.read_text(encoding="utf-8"))
        if time.monotonic() > deadline:
            raise DataError(f"local rank {local_rank} waited {limit:.0f}s for local rank 0 to check the data of "
                            f"{man.fingerprint} (marker {ok}); is local rank 0 running on this node? "
                            f"({STAGE_TIMEOUT_ENV} sets the wait)")
        time.sleep(0.1)


def open_run_data(
    recipe: Recipe,
    paths: RunPaths,
    local_rank: int = 0,
    stage_dir: str | os.PathLike[str] | None = None,
    *,
    token: str | None = None,
    timeout: float | None = None,
) -> tuple[Any, MappedArrays]:
    """Train and eval arrays of the run in ``paths``, memory-mapped, staged first if asked.

    ``stage_dir`` (a node-unique directory; wins over ``recipe.data.stage_to``, whose
    environment variables expand here) turns staging on: local rank 0 of this node copies and
    verifies, the other local ranks wait for it (``token`` names this launch; default from
    ``$CLUSTERTUNE_STAGE_TOKEN``, SLURM and torchrun variables). Without it the shared prepared
    directory is read in place (sizes checked). With ``data.streaming`` the train side is a
    :class:`~clustertune.data.stream.BlockStream` over the recipe's text (the loader takes it).
    """
    ref = read_run_data(paths)
    source = Path(ref.dir)
    spec = os.fspath(stage_dir) if stage_dir is not None else recipe.data.stage_to
    if spec:
        root = resolve_stage_root(spec, job=paths.run_id) if stage_dir is None else Path(spec)
        where = stage_once_per_node(source, root, local_rank, token or _default_token(paths), timeout)
        man = _checked(where, ref.fingerprint)  # staging checked every file it copied or kept
    else:
        where = source
        man = _checked(where, ref.fingerprint)
        # The ranks of one node share their torchrun agent (the parent); one process is its own launch.
        launch = os.getppid() if "LOCAL_RANK" in os.environ else os.getpid()
        verify_once_per_node(man, paths, local_rank, f"{token or _default_token(paths)}|{launch}", timeout)
    if man.record.streaming:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(man.tokenizer_dir))
        return BlockStream(texts_of_source(recipe.data), tok, recipe.data.block_size), open_split(man, "validation")
    return open_split(man, "train"), open_split(man, "validation")


def _checked(where: Path, fp: str) -> Manifest:
    man = load_manifest(where)
    if man.fingerprint != fp:
        raise DataError(f"prepared data {where} is fingerprint {man.fingerprint}, but the run needs {fp}")
    man.check_sizes()
    return man
