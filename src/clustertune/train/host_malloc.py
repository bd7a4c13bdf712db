"""Host memory a training step frees, kept for the next step instead of given back to the kernel.

glibc's malloc serves each allocation over its mmap threshold (dynamic, at most 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` when freed, and trims the heap's free top. A
training step on the CPU frees its activations and logits and asks for the same sizes again at
the next step, so every step faults the same pages in anew and the kernel zeroes each one. On
the quickstart's model that was 1.3 million page faults in 20 steps and 2.6 s of system time
out of 16 s of CPU. With both thresholds at 1 GiB, blocks under 1 GiB come from the heap and
stay there once freed: the same run faults 0.2 million pages, for 2-6% more peak resident
memory (the step's own high-water mark, held from the first step on). benchmarks/host_malloc.py
runs the quickstart both ways.
PyTorch's CPU tuning advice reaches the same end with jemalloc or tcmalloc preloaded.

Done once per training process, before the model is built. Left alone where the user chose an
allocator or malloc settings of their own, and where ``CLUSTERTUNE_KEEP_FREED_MEMORY=0``.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

OPT_OUT = "CLUSTERTUNE_KEEP_FREED_MEMORY"
KEEP_BELOW = 1 << 30  # bytes: blocks smaller than this come from the heap and stay there
FALLBACK_BELOW = 32 << 20  # the most an older glibc takes
# mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
_PRELOADED = ("jemalloc", "tcmalloc", "mimalloc")
_done: bool | None = None


def users_own_choice(env: Mapping[str, str]) -> str | None:
    """What in ``env`` says the user set up malloc themselves (then it is theirs to keep), or None."""
    if env.get(OPT_OUT, "").strip().lower() in ("0", "false", "no", "off"):
        return f"{OPT_OUT}={env[OPT_OUT]}"
    if "glibc.malloc." in env.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES sets glibc.malloc"
    # glibc's older spelling of the same settings: MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, ...
    own = sorted(k for k in env if k.startswith("MALLOC_") and k.endswith("_"))
    if own:
        return f"{own[0]} is set"
    preload = env.get("LD_PRELOAD", "")
    for name in _PRELOADED:
        if name in preload:
            return f"LD_PRELOAD has {name}"
    return None


def keep_freed_memory(env: Mapping[str, str] | None = None) -> bool:
    """Set glibc's malloc to keep freed blocks under 1 GiB in the process; True if it now does.
    Once per process (a second call returns the first's answer). False off glibc (macOS, musl)
    and where :func:`users_own_choice` finds the user's own settings."""
    global _done
    if _done is not None:
        return _done
    why = users_own_choice(os.environ if env is None else env)
    if why:
        log.debug("host malloc left as it is: %s", why)
        _done = False
        return _done
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc: nothing to set
        _done = False
        return _done
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = apply(mallopt)
    return _done


def apply(mallopt: Callable[[int, int], int]) -> bool:
    """The settings, through ``mallopt`` (glibc's, or a stand-in). The mmap threshold first. An
    older glibc refuses more than 32 MiB (half its 64 MiB heap; Debian 12's 2.36 takes 1 GiB), so
    that is the second choice: still at or above every threshold glibc's dynamic rule reaches. A
    malloc that refuses both keeps its dynamic threshold.
    The trim threshold never alone: setting it fixes the mmap threshold at its 128 KiB start,
    which faults several times more often than glibc's default does."""
    for threshold in (KEEP_BELOW, FALLBACK_BELOW):
        if mallopt(M_MMAP_THRESHOLD, threshold) == 1:
            return mallopt(M_TRIM_THRESHOLD, KEEP_BELOW) == 1
    return False
