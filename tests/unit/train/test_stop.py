"""The hang watchdog counts training steps only: not the time before the first step (loading,
compiling) and not evaluations or checkpoint writes, which may take longer than a step. Each
case runs in its own process, since the watchdog ends the process it fires in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _run(body: str, log: Path) -> subprocess.CompletedProcess[str]:
    code = f"""
import time
from clustertune.train.stop import StopFlag
fh = open({str(log)!r}, "a")
flag = StopFlag(None, install_handlers=False, watchdog_seconds=0.5, watchdog_log=fh)
{body}
print("finished")
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_time_before_the_first_step_and_inside_a_pause_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    out = _run("""
time.sleep(1.5)          # loading the model, compiling the first step
flag.beat()              # the first step: armed from here
with flag.paused():
    time.sleep(1.5)      # a long evaluation or checkpoint
flag.beat()
flag.close()
""", log)
    assert out.returncode == 0 and "finished" in out.stdout, out.stderr
    assert log.read_text() == ""


def test_after_a_pause_it_is_armed_again_and_fires(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    out = _run("""
flag.beat()
with flag.paused():
    time.sleep(1.0)
def stuck_after_the_evaluation():
    time.sleep(30)
stuck_after_the_evaluation()
""", log)
    assert out.returncode != 0 and "finished" not in out.stdout
    assert "stuck_after_the_evaluation" in log.read_text()


def test_a_pause_before_the_first_step_does_not_arm_it(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    out = _run("""
with flag.paused():      # an evaluation at step 0
    pass
time.sleep(1.5)
flag.close()
""", log)
    assert out.returncode == 0 and "finished" in out.stdout, out.stderr


def test_held_between_hooks_it_waits_for_release_then_fires(tmp_path: Path) -> None:
    """TRL evaluates and saves between two of our hooks: held from the end of that step to the
    start of the next, then watched again."""
    log = tmp_path / "rank-0.log"
    out = _run("""
flag.beat()
assert flag.hold() is True
time.sleep(1.5)          # the trainer's checkpoint, longer than the watchdog's limit
flag.release()           # the next step begins
def stuck_in_the_next_step():
    time.sleep(30)
stuck_in_the_next_step()
""", log)
    assert out.returncode != 0 and "finished" not in out.stdout
    text = log.read_text()
    assert "stuck_in_the_next_step" in text  # not killed while held: it got to the next step


def test_hold_before_the_first_step_arms_nothing(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    out = _run("""
assert flag.hold() is False
flag.release()
time.sleep(1.5)
flag.close()
""", log)
    assert out.returncode == 0 and "finished" in out.stdout, out.stderr
    assert log.read_text() == ""
