"""The local files a recipe names reach the nodes through the run, whatever the backend.

:mod:`clustertune.recipe.local_paths` says which keys name local paths; this module decides,
once per run, what each node reads for them and makes it so:

- local and in-process runs read the paths in place (made absolute);
- SLURM nodes read paths under ``launch.node_visible``, the run directory or the data cache in
  place; anything else is snapshotted into the run directory (``snapshots/<digest>/<name>``,
  hard-linked from the local store, or copied where the store is on another filesystem);
- SSH hosts get a content-addressed snapshot (``<host root>/files/<digest>/<name>``), sent once
  per host and content from the local store (:mod:`clustertune.launch.ssh` sends it).

The local store (``<cache root>/files/<digest>/<name>``) is a copy, never a link to the user's
file: an edit made in place after submission (``echo >> ds_config.json``) must not reach a
resumed run, and a hard link would share it. Raw data files travel only where the data is
prepared on the nodes (a SLURM data step, or a task whose trainer loads its own data); else
they were read here and only the prepared data travels.

What was decided (:func:`decide`, part of the launch's one decision) is recorded in ``run.json``
(``files``: key, original path, digest, size, how) when the run is created, its recipe naming the
copies; a resume reads that record.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clustertune.errors import DataError, LaunchError
from clustertune.fsutil import build_dir_once
from clustertune.recipe.local_paths import Named, locate, named_paths, with_values
from clustertune.recipe.schema import Recipe
from clustertune.recipe.sent_files import SKIP, sent_files_problems
from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run
from clustertune.tasks import task_of

# Under the data cache root: the local store of snapshots, by digest.
STORE_DIR = "files"
IN_PLACE, SNAPSHOT, SHIPPED, PREPARED_HERE = "in place", "snapshot", "shipped", "prepared here"


def tree_files(path: Path) -> list[str]:
    """The regular files of a folder (relative, sorted; symbolic links followed), or ``[""]``
    for a file."""
    if path.is_file():
        return [""]
    out = []
    for dirpath, dirnames, filenames in os.walk(path, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
        rel = os.path.relpath(dirpath, path)
        out += [os.path.normpath(os.path.join(rel, f)) for f in filenames if os.path.isfile(os.path.join(dirpath, f))]
    return sorted(out)


def size_of(path: Path) -> int:
    return sum((path / f).stat().st_size if f else path.stat().st_size for f in tree_files(path))


def content_digest(path: Path) -> str:
    """The digest a snapshot of ``path`` is named by: its name, its files' names and contents."""
    h = hashlib.sha256(path.name.encode("utf-8", "surrogateescape") + b"\0")
    for rel in tree_files(path):
        f = path / rel if rel else path
        fh = hashlib.sha256()
        with f.open("rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                fh.update(block)
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + fh.digest())
    return h.hexdigest()[:20]


def under(path: Path, prefixes: list[str | Path]) -> bool:
    return any(path == Path(p) or Path(p) in path.parents for p in prefixes)


@dataclass(frozen=True)
class Placed:
    """One local path of a run, and what the nodes read for it."""

    key: str
    path: str  # on the submitting machine, absolute
    how: str  # IN_PLACE, SNAPSHOT, SHIPPED or PREPARED_HERE
    name: str  # its last name: in a snapshot, and in files/ for launch.files
    extra: bool  # lives in the run's files/ folder (launch.files, a reward module)
    digest: str = ""
    bytes: int = 0
    node: str = ""  # what the recipe the nodes read names (SSH: the local store's copy, renamed per host)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Placed:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def data_on_nodes(recipe: Recipe, prepares_here: bool) -> bool:
    """Whether the raw data is read on the nodes (else it is prepared on this machine)."""
    return not prepares_here or not task_of(recipe.task).prepares_data


def how_for(n: Named, path: Path, backend: str, recipe: Recipe, run_dir: Path, cache: Path, nodes_read_data: bool) -> str:
    if n.role == "data" and not nodes_read_data:
        return PREPARED_HERE
    if backend in ("local", "inprocess"):
        return IN_PLACE
    if backend == "ssh":
        return SHIPPED
    if under(path, [*recipe.launch.node_visible, run_dir, cache]):
        return IN_PLACE
    return SNAPSHOT


def decide(recipe: Recipe, backend: str, run_dir: Path, cache: Path, nodes_read_data: bool) -> list[Placed]:
    """What each local path of ``recipe`` becomes on ``backend`` (nothing is read or copied;
    the dry run prints this). Paths are absolute by now (the preflight made them so)."""
    out = []
    for n in named_paths(recipe):
        path = locate(n.value)
        if not path.exists():
            raise LaunchError(f"{n.key}: {n.value!r} does not exist (on this machine, where the run is submitted); "
                              "fix the path")
        how = how_for(n, path, backend, recipe, run_dir, cache, nodes_read_data)
        out.append(Placed(n.key, str(path), how, n.name or path.name, n.role == "extra"))
    return out


def check_exist(recipe: Recipe) -> None:
    """Every local path the recipe names exists here, and what launch.files sends can be sent
    (:mod:`clustertune.recipe.sent_files`, as `clustertune validate` checks it): checked before
    a run directory is made."""
    missing = [n for n in named_paths(recipe) if not locate(n.value).exists()]
    if missing:
        error = DataError if all(n.role == "data" for n in missing) else LaunchError
        raise error("; ".join(f"{n.key}: {n.value!r} does not exist on this machine (relative paths start at "
                              f"{os.getcwd()})" for n in missing) + "; fix the path(s) before submitting")
    found = sent_files_problems(recipe.launch.files)
    if found:
        raise LaunchError("launch.files cannot be sent to the nodes as they are:\n  - "
                          + "\n  - ".join(f"{key}: {message}" for key, message in found))


def describe(placed: list[Placed], backend: str) -> list[str]:
    """The dry run's lines: each path and what happens to it."""
    what = {IN_PLACE: "read in place" + (" (launch.node_visible, the run directory or the data cache)"
                                         if backend == "slurm" else ""),
            SNAPSHOT: "snapshotted into the run directory (the nodes read the copy)",
            SHIPPED: "sent to each host as a content-addressed snapshot (once per host and content)",
            PREPARED_HERE: "read here: the data is prepared on this machine and the prepared data travels"}
    out = []
    for p in placed:
        size = size_of(Path(p.path))
        where = f"; on the nodes as files/{p.name}" if p.extra else ""
        out.append(f"# {p.key}: {p.path} ({size / 1e6:.1f} MB): {what[p.how]}{where}")
    return ["# local files of the recipe"] + out if out else []


# -- making it so ---------------------------------------------------------------------------------


def _copy(src: Path, dest: Path) -> None:
    """``src`` (file or folder) copied to ``dest``: a reflink where the filesystem makes one
    (``cp --reflink=auto``: no data written), else a plain copy; links followed."""
    try:
        r = subprocess.run(["cp", "-RL", "--reflink=auto", "--", str(src), str(dest)], capture_output=True, timeout=3600)
        if r.returncode == 0:
            return
    except (OSError, subprocess.TimeoutExpired):
        pass  # no GNU cp (macOS): the copy below
    shutil.rmtree(dest, ignore_errors=True)
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*SKIP))
    else:
        shutil.copy2(src, dest)


def stored(key: str, src: Path, cache: Path) -> tuple[Path, str]:
    """The local store's copy of ``src`` (made once per content, checked against the digest
    after the copy: a file edited meanwhile is refused), and the digest."""
    digest = content_digest(src)
    final = cache / STORE_DIR / digest

    def build(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        _copy(src, tmp / src.name)
        for skip in SKIP:
            shutil.rmtree(tmp / src.name / skip, ignore_errors=True)
        if content_digest(tmp / src.name) != digest:
            raise LaunchError(f"{key}: {src} changed while it was being copied for the run; submit again once "
                              "nothing writes to it")

    build_dir_once(final, build, what=f"the snapshot of {src}", is_complete=lambda d: (d / src.name).exists())
    return final / src.name, digest


def _link_tree(src: Path, dest: Path) -> None:
    """``dest`` as hard links to the store's copy ``src`` (never edited: links are safe there),
    or a copy where they are on different filesystems."""
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if src.is_dir():
            shutil.copytree(src, tmp, copy_function=os.link)
        else:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            os.link(src, tmp)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.unlink(missing_ok=True)
        _copy(src, tmp)
    os.replace(tmp, dest)


def stored_copies(placed: tuple[Placed, ...] | list[Placed], run_dir: Path, cache: Path) -> list[Placed]:
    """What a new run's nodes read for each decided path: the local store's copy for a snapshot
    or a host's, made once per content, and where the nodes find it (a snapshot: under
    ``run_dir``, linked there by :func:`link_into` once the run exists). Nothing is written into
    ``run_dir``, which need not exist yet."""
    out = []
    for p in placed:
        if p.how == SNAPSHOT:
            copy, digest = stored(p.key, Path(p.path), cache)
            p = replace(p, digest=digest, bytes=size_of(copy), node=str(RunPaths(run_dir).snapshots / digest / p.name))
        elif p.how == SHIPPED:
            copy, digest = stored(p.key, Path(p.path), cache)
            p = replace(p, digest=digest, bytes=size_of(copy), node=str(copy))
        else:
            p = replace(p, node=p.path)
        out.append(p)
    return out


def for_nodes(recipe: Recipe, placed: list[Placed]) -> Recipe:
    """``recipe`` naming what the nodes read (:func:`stored_copies`) instead of the originals:
    the run directory's recipe."""
    values = {p.key: p.node for p in placed if not p.extra}
    return Recipe.model_validate(with_values(recipe.to_plain(), values)) if values else recipe


def link_into(run: Run, placed: list[Placed] | tuple[Placed, ...], backend: str, cache: Path, *, new: bool) -> None:
    """The run directory's part: a new run's snapshots linked from the store, and (but on SSH
    hosts, which get theirs when the run reaches them) its files/ folder."""
    if new:
        for p in placed:
            if p.how == SNAPSHOT:
                Path(p.node).parent.mkdir(parents=True, exist_ok=True)
                _link_tree(cache / STORE_DIR / p.digest / Path(p.path).name, Path(p.node))
    if backend != "ssh":
        link_extras(run.paths.files, [(p.name, p.node) for p in placed if p.extra])


def link_extras(folder: Path, entries: list[tuple[str, str]]) -> None:
    """The run's files/ folder: a link by name to each launch.files entry's copy (or original)."""
    if not entries:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in entries:
        link = folder / name
        if link.is_symlink() or link.exists():
            continue
        # Relative inside the run directory (it moves with it); absolute elsewhere.
        rel = os.path.relpath(target, folder) if under(Path(target), [folder.parent]) else target
        os.symlink(rel, link)


def host_path(root: str, p: Placed) -> str:
    """Where an SSH host keeps the snapshot of ``p`` (under its root, by digest)."""
    return posixpath.join(root, STORE_DIR, p.digest, p.name)


def shipped(run: Run) -> list[Placed]:
    return [p for p in (Placed.from_json(d) for d in run.info.files) if p.how == SHIPPED]
