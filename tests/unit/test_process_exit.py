"""clustertune's commands end without the interpreter's teardown, and lose nothing by it: the exit
status, the atexit handlers (logging's among them), the threads still writing, the buffered
output, and a closed pipe's status."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(body: str, tmp_path: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          **kwargs)  # type: ignore[call-overload]


def test_the_status_atexit_handlers_threads_logs_and_output_all_survive(tmp_path: Path) -> None:
    out = _run("""
        import atexit, logging, sys, threading, time
        from pathlib import Path
        from clustertune.process_exit import exit_now

        handler = logging.FileHandler("log.txt")  # buffered until logging's atexit flush and close
        logging.getLogger("x").addHandler(handler)
        logging.getLogger("x").warning("kept")
        atexit.register(lambda: Path("atexit.txt").write_text("ran"))

        def late():
            time.sleep(0.5)
            Path("thread.txt").write_text("joined")

        threading.Thread(target=late).start()
        # A pool never shut down: its idle worker waits for work until threading's exit hook wakes it.
        from concurrent.futures import ThreadPoolExecutor
        POOL = ThreadPoolExecutor(1)
        POOL.submit(lambda: None).result()
        sys.stdout.write("no newline, still buffered")
        exit_now(3)
    """, tmp_path)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "no newline, still buffered"
    assert (tmp_path / "atexit.txt").read_text() == "ran"
    assert (tmp_path / "thread.txt").read_text() == "joined"
    assert (tmp_path / "log.txt").read_text() == "kept\n"


def test_output_into_a_closed_pipe_ends_with_status_1_as_sys_exit_gives_it() -> None:
    body = textwrap.dedent("""
        import os, sys
        from clustertune.process_exit import exit_now
        sys.stdout.write("x" * 1000)  # held in the stream's buffer
        os.read(0, 1)  # until the reader has gone (stdin closed)
        exit_now(0)
    """)
    proc = subprocess.Popen([sys.executable, "-c", body], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.close()  # the reader went away, as `clustertune ... | head` leaves it
    proc.stdin.close()
    assert proc.wait(timeout=60) == 1


def test_the_console_entry_point_ends_through_it_with_mains_status() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "clustertune"]
    assert ep.value == "clustertune.cli.main:run"
    exe = Path(sys.executable).with_name("clustertune")
    bad = subprocess.run([str(exe), "validate", "no-such-recipe.yaml"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no recipe file or shipped recipe named 'no-such-recipe.yaml'" in bad.stderr
