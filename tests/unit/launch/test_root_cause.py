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


def test_of_two_ranks_that_exited_with_code_1_the_one_that_wrote_its_last_line_first_leads(tmp_path) -> None:
    import os

    from clustertune.launch.command import failing_ranks
    from clustertune.runs.paths import RunPaths

    paths = RunPaths(tmp_path)
    paths.logs_dir.mkdir()
    # torchrun observed rank 0 first (the barrier it failed in), but rank 1 stopped on its own.
    both = SUMMARY.replace("exitcode  : -15 (pid: 19538)  (SIGTERM)", "exitcode  : 1 (pid: 19538)") \
        .replace("rank      : 0 (local_rank: 0)", "rank      : 1 (local_rank: 1)").format(rank=0, code=1)
    paths.rank_log(1).write_text("SystemExit: no data at /nope\n")
    paths.rank_log(0).write_text("RuntimeError: Connection closed by peer\n")
    os.utime(paths.rank_log(1), ns=(1_000_000_000, 1_000_000_000))
    os.utime(paths.rank_log(0), ns=(2_000_000_000, 2_000_000_000))
    text = failing_ranks(paths, [both])
    assert text is not None and text.index("rank 1 exited with code 1") < text.index("rank 0 exited with code 1"), text
    assert "no data at /nope" in text.split("rank 0 exited")[0]
    # A rank torchrun stopped itself is not listed; no summary, nothing to say.
    assert "rank 1" not in (failing_ranks(paths, [SUMMARY.format(rank=0, code=1)]) or "")
    assert failing_ranks(paths, ["no summary here\n"]) is None


def test_a_command_rank_its_wrapper_stopped_with_sigterm_is_not_a_cause(tmp_path) -> None:
    from clustertune.launch.command import failed_ranks

    # The wrapper passes torchrun's SIGTERM on to the command and exits 143, as a shell would.
    text = SUMMARY.replace("exitcode  : -15 (pid: 19538)  (SIGTERM)", "exitcode  : 143 (pid: 19538)")
    assert failed_ranks(text.format(rank=1, code=1)) == [(1, 1)]
