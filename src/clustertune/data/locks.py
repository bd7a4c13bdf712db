"""An exclusive file lock (``flock``) that says who is waiting for what.

Used where several processes, ranks or jobs may build the same thing: the first takes the
lock and builds, the others block on it and then find the result. The kernel releases the
lock when its holder dies, even by SIGKILL, so a crash never leaves a lock behind.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clustertune.errors import DataError

log = logging.getLogger("clustertune")


@contextmanager
def file_lock(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` block."""
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
