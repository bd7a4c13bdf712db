"""`clustertune run` in a real terminal (tmux), as a person sees it: the bar ends at the last
step with the newest evaluation beside it, checkpoints get a line, library warnings stay off
the screen (they are in the run's log), and the end says what to do next."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.helpers import TINY_CAUSAL, with_

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

# Long enough to be seen live: 12 steps of this model train in about 0.2 s here, and the process
# ends at once after its last line, so a screen read every half second could miss the whole run
# (it did, once in a CI run). 48 steps and a read every 50 ms leave many reads inside the run.
STEPS, EVERY = 48, 16
RECIPE = with_(TINY_CAUSAL, train={"max_steps": STEPS, "log_every": 4, "eval_every": EVERY, "save_every": EVERY})


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.mark.parametrize("procs", [None, 2], ids=["in-process", "two-ranks"])
def test_the_progress_bar_in_a_terminal(tmp_path: Path, procs: int | None) -> None:
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root = tmp_path / "runs"
    exe = Path(sys.executable).with_name("clustertune")
    done = tmp_path / "exit-code"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in os.environ.items()
                   if k.startswith(("CLUSTERTUNE_", "HF_", "TOKENIZERS_")))
    # No COLUMNS/LINES from this process: the program measures the terminal, as it would for a person.
    # Two ranks: torchrun's processes write the lines, the terminal's process shows them.
    ranks = f" launch.procs_per_node={procs}" if procs else ""
    command = (f"env -u COLUMNS -u LINES {env} {shlex.quote(str(exe))} run {shlex.quote(str(recipe_file))}{ranks} "
               f"--runs-root {shlex.quote(str(root))}; "
               f"echo $? > {shlex.quote(str(done))}; sleep 600")
    socket = f"ct-{uuid.uuid4().hex[:8]}"
    tmux(socket, "new-session", "-d", "-x", "200", "-y", "60", command)
    try:
        deadline = time.monotonic() + 300
        live = False  # a bar with an eval label on the screen while the run was still going
        while not done.is_file():
            assert time.monotonic() < deadline, tmux(socket, "capture-pane", "-p")
            if not live:
                now = tmux(socket, "capture-pane", "-p").splitlines()
                live = any(ln.startswith("train ") and "eval@" in ln for ln in now) and not done.is_file()
            time.sleep(0.05)
        screen = tmux(socket, "capture-pane", "-p", "-S", "-200")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)
    assert done.read_text().strip() == "0", screen
    (run_dir,) = list(root.iterdir())
    bars = [ln for ln in screen.splitlines() if ln.startswith("train ")]
    assert bars and f" {STEPS}/{STEPS} " in bars[-1] and f"eval@{STEPS} perplexity" in bars[-1], screen
    for step in (EVERY, 2 * EVERY):
        assert f"checkpoint step-{step:08d} written" in screen, screen
    assert "Setting accelerator" not in screen and "WARNING" not in screen, screen
    assert not any(ln.startswith("step ") for ln in screen.splitlines()), screen  # a bar, not lines
    assert " INFO " not in screen, screen  # the ranks' log records show as their messages
    # A plain run imports no DeepSpeed, whose import warning was the library warning seen here; the
    # real one is kept off the terminal in tests/unit/runs/test_library_logs.py.
    assert "WARNING" not in (run_dir / "logs" / "run.log").read_text()
    assert f"next:    clustertune runs show {run_dir.name} --plot" in screen, screen
    # The bar and its eval label were on the screen while the run went on, not only printed at its end.
    assert live, screen
