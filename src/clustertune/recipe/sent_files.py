"""What ``launch.files`` sends to the nodes, checked once on this machine before anything runs.

`clustertune validate` (and so `clustertune run`) checks a recipe's ``launch.files`` here, and
`clustertune launch` a command's, with the same words. Each entry lands in the run's ``files/``
folder by its last name: read in place on this machine, or copied (links followed) into a
snapshot that SLURM nodes and SSH hosts read. What such a copy would get wrong is refused
here, naming the path and the fix, instead of failing on a host later:

- a symbolic link loop inside a listed folder (a copy that follows links never ends);
- a link out of the listed folder (the nodes would get whatever it points at, a home folder
  or a key included) or to nothing (the file would silently be missing there);
- a FIFO, socket or device (reading one blocks or streams forever; it is not data);
- an entry this user cannot read (the copy would stop half-way);
- two entries of the same last name (one would hide the other in ``files/``).

Folders named in :data:`SKIP` are never sent, so never looked into.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from clustertune.recipe.local_paths import locate, not_found

# Never part of a snapshot: version-control internals (a model cloned with git keeps its LFS
# objects twice there) and interpreter caches.
SKIP = frozenset({".git", "__pycache__"})
# Problems named per entry; a folder with thousands of bad files says how many more there are.
SHOWN = 5

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _readable(path: Path, is_dir: bool) -> bool:
    """Whether this user can read ``path`` (and, a folder, list and enter it)."""
    return os.access(path, os.R_OK | (os.X_OK if is_dir else 0))


def _not_data(shown: str, mode: int) -> str:
    kind = next((k for test, k in _KINDS if test(mode)), "neither a regular file nor a folder")
    return (f"{shown!r} is {kind}: only regular files and folders are sent to the nodes; remove it from the "
            "folder, or list the files beside it instead of the folder")


def _unreadable(shown: str) -> str:
    return f"{shown!r} cannot be read (permission denied): make it readable (chmod u+r) or remove it"


def _loop(shown: str, target: str | None = None) -> str:
    how = f"it leads back to {target}, a folder that holds it" if target else "it cannot be followed"
    return (f"{shown!r} is a symbolic link loop ({how}): a copy that follows links would never end; remove the "
            "link")


def _walk(d: Path, real: Path, shown: str, top: Path, top_value: str, above: tuple[Path, ...],
          out: list[str]) -> None:
    """The problems of folder ``d`` (``real``: where it really is; ``shown``: as the user names
    it), links followed as a copy follows them; ``above``: the real folders it is inside of."""
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            out.append(_unreadable(shown))
        else:
            out.append(f"{shown!r} cannot be listed ({exc.strerror}); fix it or remove it")
        return
    for e in entries:
        p, name = Path(e.path), f"{shown}/{e.name}"
        if e.is_symlink():
            try:
                st = os.stat(p)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    out.append(_loop(name))
                else:
                    out.append(f"{name!r} is a symbolic link to {os.readlink(p)!r}, which does not exist: remove the "
                               "link, or put back what it points at")
                continue
            target = p.resolve()
            if target != top and top not in target.parents:
                out.append(f"{name!r} is a symbolic link to {target}, outside the listed folder {top_value!r}: only "
                           "what is inside a listed folder is sent; copy the target into the folder (cp -L) in place "
                           "of the link, or give it as its own launch.files entry")
                continue
            if stat.S_ISDIR(st.st_mode) and (target == real or target in above):
                out.append(_loop(name, str(target)))
                continue
        else:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as exc:
                out.append(f"{name!r} cannot be looked at ({exc.strerror}); fix it or remove it")
                continue
            target = real / e.name
        if stat.S_ISDIR(st.st_mode):
            if e.name in SKIP:
                continue
            if not _readable(p, True):
                out.append(_unreadable(name))
            else:
                _walk(p, target, name, top, top_value, (*above, real), out)
        elif not stat.S_ISREG(st.st_mode):
            out.append(_not_data(name, st.st_mode))
        elif not _readable(p, False):
            out.append(_unreadable(name))


def entry_problems(value: str, base: Path | None = None) -> list[str]:
    """What is wrong with sending ``value`` (a launch.files entry, as written) to the nodes; each
    message names the path, as the user would write it, and the fix."""
    path = locate(value, base)
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return [_loop(value)]
        return [f"{not_found(value, base)}; fix the path or remove the entry"]
    if stat.S_ISREG(st.st_mode):
        return [] if _readable(path, False) else [_unreadable(value)]
    if not stat.S_ISDIR(st.st_mode):
        return [_not_data(value, st.st_mode)]
    if not _readable(path, True):
        return [_unreadable(value)]
    out: list[str] = []
    top = path.resolve()
    _walk(path, top, value.rstrip("/") or value, top, value, (), out)
    if len(out) > SHOWN:
        out = out[:SHOWN] + [f"{value!r}: and {len(out) - SHOWN} more such entries inside it"]
    return out


def sent_files_problems(files: list[str], base: Path | None = None) -> list[tuple[str, str]]:
    """(key, message) for every ``launch.files`` entry that cannot be sent as it is, and for
    every two of one last name (``base``: the recipe's folder, where relative paths start)."""
    out = [(f"launch.files.{i}", m) for i, f in enumerate(files) for m in entry_problems(f, base)]
    names = [locate(f, base).name for f in files]
    for i, name in enumerate(names):
        if name in names[:i]:
            out.append((f"launch.files.{i}", f"{files[i]!r} has the same name ({name!r}) as "
                        f"launch.files.{names.index(name)}; both would land at files/{name} on the nodes: rename one"))
    return out
