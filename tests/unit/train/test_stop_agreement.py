"""Ranks agree on a stop request and on its cause: a rank whose own signal has not arrived yet
records the cause another rank saw (rank 0 writes the run's end, so a time-limit signal that
reached rank 1 first must still end the run as a time limit). Two real processes, one gloo
all-reduce each round."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RANK = """
import os, signal, sys
import torch
import torch.distributed as dist
from clustertune.train.attempt import exit_rank
from clustertune.train.stop import StopFlag

rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=2)


class Ranks:  # the two calls StopFlag.agreed makes of a strategy
    device = torch.device("cpu")

    def reduce(self, t, reduction):
        dist.all_reduce(t)
        return t


flag = StopFlag(None)
print("round1", flag.agreed(Ranks()), flag.requested_by)
if rank == 1:
    os.kill(os.getpid(), signal.SIGUSR2)  # the time limit's signal, on rank 1 only
dist.barrier()
print("round2", flag.agreed(Ranks()), flag.requested_by)
dist.barrier()
# Ended as clustertune's ranks end: letting Python finalize with gloo's threads alive aborts one
# exit in many (SIGABRT, "terminate called without an active exception"; tests/integration/test_rank_exit.py).
exit_rank(0)
"""


def test_a_rank_without_the_signal_takes_the_cause_another_rank_saw(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(store)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    lines = [out.split("\n") for out, _ in outs]
    assert lines[0][0] == lines[1][0] == "round1 False None"
    assert lines[1][1] == "round2 True SIGUSR2"
    assert lines[0][1] == "round2 True SIGUSR2 on another rank"
