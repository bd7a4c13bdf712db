"""A runs root on a device that fills up (a 3 MB tmpfs, mounted as root, as .ci/run runs): the
checkpoint that does not fit fails the run with one message, the partial write is removed, the
earlier checkpoint stays intact, `status` works, and once there is space `--resume` continues."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clustertune.errors import DiskFullError
from clustertune import api
from clustertune.recipe.load import load_recipe
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, list_runs
from tests.helpers import TINY_CAUSAL, cli, with_

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)


@pytest.fixture
def small_device(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    where.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)], capture_output=True, text=True)
    assert out.returncode == 0, f"this test mounts a small tmpfs and needs root: {out.stderr}"
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_fails_the_run_with_one_message_and_keeps_the_earlier_checkpoint(small_device: Path) -> None:
    recipe = load_recipe(with_(TINY_CAUSAL, train={"max_steps": 8, "save_every": 2, "keep_last": 10,
                                                   "eval_at_start": False, "log_every": 2}))
    with pytest.raises(DiskFullError) as err:
        api.run(recipe, runs_root_dir=small_device, show_progress=False)
    (run,) = list_runs(small_device)
    kept = sorted(p.name for p in run.paths.checkpoints.iterdir())
    assert kept and all(k.startswith("step-") for k in kept)  # no partial .tmp- directory left
    msg = str(err.value)
    assert f"no space left on the device of {run.paths.checkpoints}" in msg and f"--resume {run.id}" in msg
    assert f"the earlier checkpoints are intact ({', '.join(kept)})" in msg
    assert run.state is RunState.FAILED and run.info.reason == msg
    status = cli("status", run.id, "--runs-root", str(small_device))
    assert status.returncode == 0 and "FAILED" in status.stdout and "Traceback" not in status.stderr

    subprocess.run(["mount", "-o", "remount,size=40m", str(small_device)], check=True)  # space is back
    again = api.run(None, resume=run.id, runs_root_dir=small_device, show_progress=False)
    assert again.state is RunState.COMPLETED
    assert get_run(run.id, small_device).attempts[-1].resumed_from == kept[-1]


def test_a_full_disk_fails_a_multi_rank_run_with_the_same_message(small_device: Path) -> None:
    # The same end on 2 ranks as in one process: one message that says how to go on, not
    # torchrun's error block (the ranks' attempt ends through the same code).
    recipe = load_recipe(with_(TINY_CAUSAL, train={"max_steps": 8, "save_every": 2, "keep_last": 10,
                                                   "eval_at_start": False, "log_every": 2},
                               launch={"procs_per_node": 2}))
    run = api.run(recipe, runs_root_dir=small_device, show_progress=False)
    assert run.state is RunState.FAILED
    reason = run.info.reason or ""
    # The message itself, not "rank 0: DiskFullError: ..." with torchrun's error block after it.
    assert reason.startswith("no space left on the device of") and f"--resume {run.id}" in reason, reason
    assert "Traceback" not in reason, reason
    status = cli("status", run.id, "--runs-root", str(small_device))
    assert status.returncode == 0 and "FAILED" in status.stdout and "Traceback" not in status.stderr
