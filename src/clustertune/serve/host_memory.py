"""Host memory for a long-running server: keep what was freed for the next request.

A server computes on worker threads (the Tinker API's one line of work, transformers' batching
thread). glibc gives each such thread an arena of its own, made of 64 MiB heaps, and hands a
heap back to the system as soon as a request's tensors leave it empty: on the next request every
page of those tensors is faulted in and zeroed again. Measured on a 2-core CPU machine
(`benchmarks/tinker_loop.py`, RESULTS.md): the Tinker worker took about 97,000 page faults a
second, some 8,000 a training step, and spent 75-85 ms on a forward and backward that takes
64 ms in a plain loop. The training processes of `clustertune run` compute on their main thread,
whose arena glibc already keeps.

:func:`keep_freed_memory` (called before the server starts its threads) puts every thread on the
main arena, serves allocations up to 32 MiB (glibc's largest setting) from it and never trims
it: the process keeps its peak resident size, as GPU caching allocators do, and threads share
one arena's lock (a server's threads take turns on the model anyway). Other C libraries (musl,
macOS) are left as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("clustertune.serve")

# mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# glibc refuses an mmap threshold above half its heap size (32 MiB on 64-bit).
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Set glibc's arena count and thresholds (process-wide); whether they were set."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) \
        and bool(mallopt(M_ARENA_MAX, 1))
    log.debug("glibc malloc thresholds %s", "set" if done else "left as they were")
    return done
