"""Ending one of clustertune's own processes without the interpreter's teardown.

Once torch and transformers are imported, finalizing the interpreter (clearing thousands of
modules and freeing their objects) takes 1-2 s of CPU on 2 cores, after the last line is printed
and before the shell, or a launcher polling the process, sees it end: measured on `clustertune
validate`, 6.2 s with it and 4.2 s without (RESULTS.md, "The test suite itself"). Every step of
Python's exit that matters still runs, in Python's order: the non-daemon threads are joined, the
atexit handlers run (logging's flush and close among them), the standard streams are flushed,
and a stream that cannot be flushed makes the status 1, as `sys.exit` does. Only the finalization
is skipped. This is for clustertune's own commands, whose files are closed or renamed into place
before they get here; a user's script (``clustertune launch``) ends the ordinary way.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once Python's exit steps above have run."""
    # Python's own first two exit steps, in its order: threading's exit hooks (they wake the idle
    # workers of a thread pool never shut down, which would otherwise wait for work for ever) and
    # the join of every non-daemon thread; then the atexit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`clustertune ... | head`): 1, as sys.exit gives
            code = code or 1
    os._exit(code)
