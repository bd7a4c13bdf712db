"""File-system building blocks, written once: atomic writes, a directory built atomically under a
lock, file digests, and an exclusive file lock that says who is waiting for what.

Everything that must never be seen half written (run.json, manifests, prepared data, trained
tokenizers, checkpoints, clusters.yaml) goes through here: a reader sees the old file or the new
one, never a mix, and a process killed mid-write leaves only a hidden temporary behind.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clustertune.errors import DataError

log = logging.getLogger("clustertune")


def temp_sibling(path: Path, tag: str = "tmp") -> Path:
    """A hidden name beside ``path``, unique to this process: renaming it onto ``path`` is atomic
    because both sit in the same directory (same file system)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{tag}")


def fsync_open(fh: Any) -> None:
    """Flush an open file's buffers and its data to disk (before it is closed and recorded)."""
    fh.flush()
    os.fsync(fh.fileno())


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and one rename.

    ``mode`` creates the file with those permissions from the start (a private file is never
    readable by others, not even for a moment); ``fsync`` flushes it to disk before the rename,
    for files whose loss after a power cut would leave a directory inconsistent.
    """
    tmp = temp_sibling(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, *, mode: int | None = None, fsync: bool = False) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode, fsync=fsync)


def atomic_write_json(path: Path, data: Any, *, fsync: bool = False, indent: int | None = 2) -> None:
    """``data`` as JSON (keys in insertion order, a final newline), written atomically."""
    text = json.dumps(data, indent=indent, sort_keys=False)
    atomic_write_text(path, text + "\n" if indent is not None else text, fsync=fsync)


def replace_dir(tmp: Path, final: Path) -> None:
    """Move the finished directory ``tmp`` to ``final``, replacing what is there.

    ``os.replace`` cannot replace a non-empty directory, so an existing ``final`` is first moved
    aside (one rename) and deleted after: a reader sees the old directory or the new one."""
    if final.exists():
        old = temp_sibling(final, "old")
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


@contextmanager
def file_lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if needed) for the ``with`` block.

    Used where several processes, ranks or jobs may build the same thing: the first takes the
    lock and builds, the others block on it and then find the result. The kernel releases the
    lock when its holder dies, even by SIGKILL, so a crash never leaves a lock behind.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise DataError(f"cannot create the lock file {path}: {exc.strerror or exc}; is {path.parent} writable?") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            log.info("waiting for %s (held by %s)", what, holder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def build_dir_once(
    final: Path,
    build: Callable[[Path], None],
    *,
    what: str,
    is_complete: Callable[[Path], bool],
    lock: Path | None = None,
) -> bool:
    """Make sure the directory ``final`` exists complete; build it at most once across processes.

    When ``is_complete(final)`` holds, nothing happens. Otherwise the lock is taken (``lock``,
    by default a hidden ``.<name>.lock`` beside ``final``), completeness is checked again (another
    process may have built it meanwhile), ``build(tmp)`` fills a fresh temporary sibling, and
    the temporary is renamed onto ``final`` (replacing a damaged one). A build that raises leaves
    no temporary behind and ``final`` untouched. Returns True when this call built it.
    """
    if is_complete(final):
        return False
    final.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(lock or final.with_name(f".{final.name}.lock"), what):
        if is_complete(final):
            return False
        tmp = temp_sibling(final, "building")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            build(tmp)
            replace_dir(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return True


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any, n: int = 20) -> str:
    """Hex sha256 of the canonical JSON of ``obj``, cut to ``n`` characters."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:n]


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes: ``sha256``, or ``xxh3`` (XXH3-128, the fast checksum staging
    verifies copies with: tens of GB/s against sha256's one or two)."""
    factory: Any
    if algorithm == "xxh3":
        import xxhash  # only the staging path needs it

        factory = xxhash.xxh3_128
    else:
        factory = algorithm
    with open(path, "rb", buffering=0) as fh:
        return str(hashlib.file_digest(fh, factory).hexdigest())


def sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")


def xxh3_file(path: Path) -> str:
    return file_digest(path, "xxh3")


def fsync_file(path: Path) -> None:
    """Flush one file's data to disk (before it is renamed into place or recorded)."""
    _fsync(path)


def fsync_dir(directory: Path) -> None:
    """Flush a directory's entries (a rename into it) to disk, where the file system allows it
    (some network file systems refuse to open or sync a directory: then nothing is done)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_all(paths: list[Path]) -> None:
    """Flush many files to disk, on threads at once: the file system commits them together
    instead of one journal commit after another."""
    if len(paths) <= 1:
        for p in paths:
            _fsync(p)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(16, len(paths)), thread_name_prefix="clustertune-fsync") as pool:
        list(pool.map(_fsync, paths))


# The errors a write gets when the disk (or the user's quota, or a file size limit) is full.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a write that ran out of space."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def free_mb(path: Path) -> float | None:
    """Free space at ``path`` (its nearest existing parent) in MB; None when it cannot be read."""
    import shutil

    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free / 1e6
    except OSError:
        return None
