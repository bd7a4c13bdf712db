"""How the node side names a failure: a rank that ran out of device memory is the cause, even
when rank 0's own error is the collective that the dead rank left hanging."""

from __future__ import annotations

from pathlib import Path

from clustertune.runs.paths import RunPaths
from clustertune.train.attempt import failure_reason, report_out_of_memory
from clustertune.train.strategies.base import OutOfMemory


def test_rank_zero_names_the_rank_that_ran_out_of_memory(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    paths.logs_dir.mkdir()
    broken = RuntimeError("Connection closed by peer [127.0.0.1]:29500")
    assert failure_reason(paths, 0, broken) == f"rank 0: RuntimeError: {broken}"
    report_out_of_memory(paths, 3, OutOfMemory("out of device memory at train.batch_size=64 ..."))
    assert failure_reason(paths, 0, broken) == ("rank 3 ran out of device memory (rank 0 then failed: RuntimeError): "
                                                "out of device memory at train.batch_size=64 ...")
    # A rank's own out-of-memory error is its own reason.
    own = OutOfMemory("out of device memory at train.batch_size=8")
    assert failure_reason(paths, 0, own) == f"rank 0: OutOfMemory: {own}"


def test_the_host_allocator_running_out_is_out_of_memory_too() -> None:
    import pytest
    import torch

    from clustertune.train.strategies.base import is_out_of_memory

    with pytest.raises(RuntimeError) as err:
        torch.empty(2**50, dtype=torch.uint8)  # a petabyte: the CPU allocator refuses at once
    assert is_out_of_memory(err.value)
    assert not is_out_of_memory(RuntimeError("Connection closed by peer"))
