"""clustertune's processes start with the garbage collector held (:mod:`clustertune.startup`) and
get it back where the work begins, at the latest from a timer, and in a child forked meanwhile.
The collector is the process's own state: each case runs in a fresh interpreter, but the release
by the training loop, which runs in this one."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import clustertune as ct
from clustertune import startup
from tests.helpers import TINY_CAUSAL, with_


def _fresh(body: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_held_until_released_then_what_the_start_dropped_is_freed_and_the_rest_frozen() -> None:
    out = _fresh("""
        import gc, weakref
        from clustertune import startup

        class Node: pass
        startup.hold()
        print(gc.isenabled(), startup.held())
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector frees it
        dropped = weakref.ref(a)
        del a, b
        junk = [[i] for i in range(50_000)]  # allocations that would have started collections
        print(dropped() is not None)
        startup.release()
        print(gc.isenabled(), startup.held(), dropped() is None, gc.get_freeze_count() > 1000)
        startup.release()  # a second call changes nothing
        print(gc.isenabled(), gc.get_freeze_count() > 1000)
    """)
    assert out.split("\n")[:4] == ["False True", "True", "True False True True", "True True"], out


def test_without_a_release_the_timer_gives_it_back_and_a_forked_child_has_it_at_once() -> None:
    out = _fresh("""
        import gc, os, time
        from clustertune import startup

        startup.hold(seconds=0.5)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: no timer thread came along
            os.write(write, b"1" if gc.isenabled() and not startup.held() else b"0")
            os._exit(0)
        os.waitpid(pid, 0)
        print(os.read(read, 1).decode(), gc.isenabled())
        deadline = time.monotonic() + 10
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.05)
        # Back on; nothing frozen (the start may still be making objects that it frees later).
        print(gc.isenabled(), startup.held(), gc.get_freeze_count())
    """)
    assert out.split("\n")[:2] == ["1 False", "True False 0"], out


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    out = _fresh("""
        import gc
        from clustertune import startup
        gc.disable()
        startup.hold()
        startup.release()
        print(gc.isenabled(), startup.held(), gc.get_freeze_count())
    """)
    assert out.strip() == "False False 0"


def test_the_training_loop_releases_it_when_the_steps_begin(runs_root: Path) -> None:
    startup.hold()
    try:
        run = ct.run(ct.load_recipe(with_(TINY_CAUSAL, train={"max_steps": 2, "eval_at_start": False})),
                     show_progress=False)
        assert run.state.value == "COMPLETED", run.info.reason
        assert gc.isenabled() and not startup.held(), "the loop did not release the collector"
    finally:
        startup.release()
