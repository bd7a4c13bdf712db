"""Managing the prepared-data cache: listing its entries, finding them by fingerprint prefix,
removing one under its lock. (Building entries is :mod:`clustertune.data.cache`.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clustertune.data.manifest import MANIFEST, Manifest, load_manifest
from clustertune.errors import DataError
from clustertune.fsutil import file_lock


def list_entries(root: Path) -> list[Manifest]:
    """Complete prepared entries under ``root`` (unreadable ones are skipped), oldest first."""
    out = []
    if not root.is_dir():
        return out
    for d in sorted(root.iterdir()):
        if d.is_dir() and not d.name.startswith(".") and (d / MANIFEST).is_file():
            try:
                out.append(load_manifest(d))
            except DataError:
                continue
    out.sort(key=lambda m: m.record.created_at or "")
    return out


def _is_entry(d: Path) -> bool:
    """A prepared entry: a directory whose valid manifest names it. Anything else under the
    root (a user's own directory, a half-written one) is not ours to remove."""
    if not d.is_dir() or d.name.startswith(".") or not (d / MANIFEST).is_file():
        return False
    try:
        return load_manifest(d).fingerprint == d.name
    except (DataError, KeyError, TypeError):
        return False


def find_entries(root: Path, prefixes: list[str]) -> list[Path]:
    """Entry directories named by fingerprint prefixes; each prefix must name exactly one."""
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")) if root.is_dir() else []
    names = [d.name for d in dirs if _is_entry(d)]
    out = []
    for p in prefixes:
        hits = [n for n in names if n.startswith(p)]
        if not hits:
            others = [d.name for d in dirs if d.name.startswith(p) and d.name not in names]
            left = (f"; {', '.join(others[:5])} under it hold no valid manifest.json naming them, so they are not "
                    "prepared data and were left alone") if others else ""
            raise DataError(f"no prepared data {p!r} under {root}{left}; `clustertune cache ls` lists the entries")
        if len(hits) > 1:
            raise DataError(f"fingerprint prefix {p!r} is ambiguous under {root}: {', '.join(hits[:5])}")
        out.append(root / hits[0])
    return out


def remove_entry(entry: Path) -> None:
    """Delete one entry under its lock (never while a prepare of it runs)."""
    root, fp = entry.parent, entry.name
    with file_lock(root / f".{fp}.lock", f"a prepare of {fp} before removing it"):
        old = root / f".old-{fp}-{os.getpid()}"
        os.replace(entry, old)
        shutil.rmtree(old, ignore_errors=True)
