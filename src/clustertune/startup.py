"""How clustertune's own processes start: without the cyclic garbage collector until the work begins.

Importing torch and transformers' model code makes some 600,000 objects that live as long as the
process. CPython runs a full collection each time the objects that survived earlier ones grow by a
quarter, and a full collection walks every one of them, so an import of that size walks what it
has made so far again and again: on a 2-core machine `import transformers` with a model class took
4.1-4.5 s with the collector and 3.3 s without (RESULTS.md, "The collector held while a process
starts"). A training rank, a torchrun agent and the CLI pay it once each per run.

An entry point calls :func:`hold` first and :func:`release` where its work begins (the first
training step, a server taking requests). :func:`release` collects once (what became garbage while
starting is freed: one walk, 0.3 s after the imports above), moves everything left into the
permanent generation (:func:`gc.freeze`: later collections never walk the libraries' objects
again) and turns the collector back on. A path that never reaches a :func:`release` gets the
collector back from a timer after ``seconds``; a child forked while it is held gets it back at
once. A library user importing clustertune is never affected: only entry points hold.
"""

from __future__ import annotations

import gc
import os
import threading

# The most a process runs without the collector when no release() is reached: long enough for a
# rank's imports and a model build on a busy node, short enough that a leak cannot grow for long.
HOLD_SECONDS = 60.0

_lock = threading.Lock()
_timer: threading.Timer | None = None
_forks_hooked = False


def hold(seconds: float = HOLD_SECONDS) -> None:
    """Turn the collector off until :func:`release`, or for ``seconds`` at most. Does nothing
    when the collector is already off (held already, or switched off by whoever runs us)."""
    global _timer, _forks_hooked
    with _lock:
        if _timer is not None or not gc.isenabled():
            return
        gc.disable()
        _timer = threading.Timer(seconds, _give_back)
        _timer.daemon = True  # never keeps a finished process waiting
        _timer.start()
        if not _forks_hooked:
            # A DataLoader worker or a pool process forked while held has no timer of its own.
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _forks_hooked = True


def held() -> bool:
    """Whether :func:`hold` has the collector off now."""
    return _timer is not None


def release() -> None:
    """The work begins: collect once, freeze what is left, collector on. Does nothing unless held."""
    global _timer
    with _lock:
        if _timer is None:
            return
        _timer.cancel()
        _timer = None
        gc.collect()
        gc.freeze()
        gc.enable()


def _give_back() -> None:
    # The timer's thread: no release() came in time. Collector on, nothing frozen: the start may
    # still be under way, and what it frees later must stay collectable.
    global _timer
    with _lock:
        if _timer is None:
            return
        _timer = None
        gc.enable()


def _after_fork_in_child() -> None:
    global _timer
    if _timer is not None:  # the parent's timer thread did not come along
        _timer = None
        gc.enable()
