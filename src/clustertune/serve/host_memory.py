"""Host memory for a long-running server: keep what was freed for the next request.

A server computes on worker threads (the Tinker API's one line of work, transformers' batching
thread). glibc gives each such thread its own arena, and hands memory back to the system as soon
as a request's tensors are freed: on the next request every page of those tensors is faulted in
and zeroed again. Measured on a 2-core CPU machine (`benchmarks/tinker_loop.py`, RESULTS.md):
about 97,000 page faults a second, 8,000 a training step, a 4-layer model's forward and backward
at 75-85 ms in the server against 64 ms in a plain loop. The training processes of `clustertune
run` compute on their main thread, whose arena glibc already keeps warm.

:func:`keep_freed_memory` tells glibc to serve allocations up to 32 MiB (its largest setting)
from the arenas and not to trim them: the process keeps its peak resident size, as GPU caching
allocators do. Other C libraries (musl, macOS) are left as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("clustertune.serve")

# mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc refuses an mmap threshold above half its heap size (32 MiB on 64-bit).
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (process-wide); whether they were set."""
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
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    log.debug("glibc malloc thresholds %s", "set" if done else "left as they were")
    return done
