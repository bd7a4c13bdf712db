"""Copies of your own paths on each node's local disk (``launch.stage``): standard library only.

Each path (a dataset directory, a Hugging Face cache folder, a file) is copied once per node, by
the node's first process (``LOCAL_RANK`` 0, or the one process of ``launch.runner: none``) while
the others wait, into ``$SLURM_TMPDIR`` where the site sets it, else ``$TMPDIR`` or the system's
temporary directory, under ``clustertune-stage/<run id>/``. The copy is checked file by file
(size and SHA-256 against the source) before anyone uses it, and it is written under a temporary
name and renamed into place, so a copy cut short never passes for a whole one. Another attempt
on the same node reuses a whole copy while the source's files keep their sizes and times.

The command finds each copy in ``CLUSTERTUNE_STAGED_<NAME>``, NAME being the path's last part in
upper case with every other character than a letter or digit as ``_`` (``/data/my-set`` gives
``CLUSTERTUNE_STAGED_MY_SET``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

STAGE_ENV = "CLUSTERTUNE_STAGE"  # the launcher's list of paths, as JSON
STAGED_PREFIX = "CLUSTERTUNE_STAGED_"
PROGRESS_SECONDS = 10.0  # a copy still going says how far it is this often: no silent minutes


class StageError(Exception):
    """A path that cannot be staged, or a copy that does not match its source."""


def env_name(path: str) -> str:
    """The variable that holds the staged copy of ``path``."""
    base = os.path.basename(os.path.normpath(path)) or "ROOT"
    return STAGED_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", base).upper()


def stage_root(env: dict[str, str]) -> Path:
    base = env.get("SLURM_TMPDIR") or env.get("TMPDIR") or tempfile.gettempdir()
    return Path(base) / "clustertune-stage" / env.get("CLUSTERTUNE_RUN_ID", "run")


def _listing(src: Path) -> dict[str, list[int]]:
    """Every file under ``src`` (``.`` for a file) with its size and modification time."""
    if src.is_file():
        st = src.stat()
        return {".": [st.st_size, st.st_mtime_ns]}
    out = {}
    for dirpath, dirnames, filenames in os.walk(src, followlinks=True):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            st = p.stat()
            out[str(p.relative_to(src))] = [st.st_size, st.st_mtime_ns]
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


class _Counted:
    """A copy function for ``shutil`` that counts the bytes copied and, every ``every`` seconds,
    says how far the whole copy is."""

    def __init__(self, src: Path, total: int, files: int, say: object, every: float) -> None:
        self.src, self.total, self.files, self.say, self.every = src, total, files, say, every
        self.done_bytes = self.done_files = 0
        self.next_at = time.monotonic() + every

    def __call__(self, a: str, b: str) -> str:
        out = shutil.copy2(a, b)
        self.done_bytes += os.path.getsize(b)
        self.done_files += 1
        if time.monotonic() >= self.next_at:
            self.next_at = time.monotonic() + self.every
            self.say(f"clustertune: staging {self.src}: {_mb(self.done_bytes)} of {_mb(self.total)} "  # type: ignore[operator]
                     f"copied ({self.files - self.done_files} files to go)")
        return out


def copy_verified(src: Path, dest: Path, manifest: Path, say: object = print,
                  every: float = PROGRESS_SECONDS) -> None:
    """``src`` copied to ``dest``, checked against it, then its manifest written (last). Says
    what it copies before it starts and, while it copies, how far it is."""
    listing = _listing(src)
    total = sum(size for size, _ in listing.values())
    say(f"clustertune: staging {src} -> {dest} ({len(listing)} files, {_mb(total)})")  # type: ignore[operator]
    partial = dest.with_name(f"{dest.name}.partial-{os.getpid()}")
    _remove(partial)
    counted = _Counted(src, total, len(listing), say, every)
    if src.is_file():
        counted(str(src), str(partial))
    else:
        shutil.copytree(src, partial, copy_function=counted)
    wrong, digests = [], {}
    for rel, (size, _) in listing.items():
        copied, original = (partial, src) if rel == "." else (partial / rel, src / rel)
        digest = _sha256(copied) if copied.is_file() and copied.stat().st_size == size else None
        if digest is None or digest != _sha256(original):
            wrong.append(rel)
        digests[rel] = digest
    if wrong:
        _remove(partial)
        raise StageError(f"the copy of {src} differs from the source in {', '.join(wrong[:5])}"
                         + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""))
    _remove(dest)
    os.replace(partial, dest)
    tmp = manifest.with_name(f"{manifest.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"source": str(src), "files": listing, "sha256": digests}))
    os.replace(tmp, manifest)


def is_whole(src: Path, dest: Path, manifest: Path) -> bool:
    """A checked copy of ``src`` as it is now."""
    try:
        seen = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    return dest.exists() and seen.get("source") == str(src) and seen.get("files") == _listing(src)


def stage(paths: list[str], env: dict[str, str], first: bool, timeout: float = 3600,
          say: object = print, every: float = PROGRESS_SECONDS) -> dict[str, str]:
    """Each path staged on this node (``first``: this process copies; the others wait for its
    copies); the variables that name the copies."""
    root = stage_root(env)
    out = {}
    for p in paths:
        src = Path(p).resolve()
        if not src.exists():
            raise StageError(f"{p} does not exist on {env.get('SLURMD_NODENAME') or os.uname().nodename}")
        dest, manifest = root / src.name, root / f"{src.name}.staged.json"
        if first:
            root.mkdir(parents=True, exist_ok=True)
            if is_whole(src, dest, manifest):
                say(f"clustertune: staged {src} -> {dest} (the copy already there)")  # type: ignore[operator]
            else:
                start = time.monotonic()
                manifest.unlink(missing_ok=True)
                copy_verified(src, dest, manifest, say, every)
                say(f"clustertune: staged {src} -> {dest} in {time.monotonic() - start:.1f}s")  # type: ignore[operator]
        else:
            deadline = time.monotonic() + timeout
            while not is_whole(src, dest, manifest):
                if time.monotonic() > deadline:
                    raise StageError(f"no copy of {src} appeared in {dest} within {timeout:g}s "
                                     "(the node's first process copies it)")
                time.sleep(0.2)
        out[env_name(p)] = str(dest)
    return out
