"""Which rank failed first, and how, from torchrun's failure summary (as it writes it)."""

from __future__ import annotations

from clustertune.launch.command import root_cause

SUMMARY = """\
clustertune.train.entry FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-23_21:06:31
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 19538)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 19538
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_21:06:30
  host      : localhost
  rank      : {rank} (local_rank: 1)
  exitcode  : {code} (pid: 19539)  (SIGSEGV)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 19539
=======================================================
"""


def test_a_rank_killed_by_a_signal_is_named_with_the_signal() -> None:
    assert root_cause("noise\n" + SUMMARY.format(rank=1, code=-11)) == (1, "died of SIGSEGV (signal 11)")
    assert root_cause(SUMMARY.format(rank=3, code=-9)) == (3, "died of SIGKILL (signal 9)")


def test_an_exit_code_is_named_and_the_latest_summary_counts() -> None:
    text = SUMMARY.format(rank=1, code=-9) + "restarted\n" + SUMMARY.format(rank=0, code=1)
    assert root_cause(text) == (0, "exited with code 1")


def test_no_summary_no_cause() -> None:
    assert root_cause("torchrun: error: the following arguments are required\n") is None


def test_a_crashed_rank_is_the_cause_even_when_torchrun_saw_another_fail_first() -> None:
    # Rank 1 segfaulted; rank 0 then failed in the collective it left and exited first: torchrun
    # calls rank 0 the root cause, the crash is the cause.
    text = SUMMARY.replace("exitcode  : -15 (pid: 19538)  (SIGTERM)", "exitcode  : -11 (pid: 19538)  (SIGSEGV)") \
        .replace("rank      : 0 (local_rank: 0)", "rank      : 1 (local_rank: 1)")
    assert root_cause(text.format(rank=0, code=1)) == (1, "died of SIGSEGV (signal 11)")
    # A rank torchrun itself stopped (SIGTERM) is not a cause.
    assert root_cause(SUMMARY.format(rank=0, code=1)) == (0, "exited with code 1")
