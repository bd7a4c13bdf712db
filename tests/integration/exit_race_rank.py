"""One rank of a two-process gloo group whose rank 0 ends while another of its threads waits
inside a collective, the way a rank's gloo workers are still alive when a training attempt ends.

    python exit_race_rank.py RANK INIT_FILE SYNC_DIR return|exit_rank

Rank 0 ends by returning from the script (``return``: the interpreter finalizes) or through
:func:`clustertune.train.attempt.exit_rank`. Rank 1 sends the tensor rank 0's thread waits for
only once rank 0's end has begun: during finalization, which an object's ``__del__`` holds open
until rank 1 has sent and for seconds after, so the wait returns exactly then, every time.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import torch
import torch.distributed as dist

rank, init_file, sync_dir, how = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ending = os.path.join(sync_dir, "rank0-ending")
dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)


sent = os.path.join(sync_dir, "rank1-sent")


class HoldsFinalizationOpen:
    """Cleared with the module's globals, after Python has marked itself finalizing: says so,
    then keeps finalization open until rank 1 has sent and well after (however loaded the
    machine), so the waiting thread wakes while it is open."""

    def __del__(self, _open=open, _sleep=time.sleep, _exists=os.path.exists, _clock=time.monotonic,
                _ending=ending, _sent=sent) -> None:
        _open(_ending, "w").close()
        deadline = _clock() + 60
        while not _exists(_sent) and _clock() < deadline:
            _sleep(0.01)
        _sleep(10)  # the abort comes during this sleep; without it, the process exits cleanly after


if rank == 0:
    # Waits inside torch's C++ code with the GIL released, as a gloo worker or a prefetching
    # thread does; it needs the GIL back when the tensor arrives.
    threading.Thread(target=lambda: dist.recv(torch.empty(8), src=1), daemon=True).start()
    time.sleep(0.5)
    if how == "exit_rank":
        from clustertune.train.attempt import exit_rank

        open(ending, "w").close()
        exit_rank(0)
    holder = HoldsFinalizationOpen()
else:
    deadline = time.monotonic() + 60
    while not os.path.exists(ending) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        dist.send(torch.ones(8), dst=0)
    except RuntimeError:
        pass  # rank 0 may be gone already: what matters is how rank 0 ended
    open(sent, "w").close()
    time.sleep(2)
    os._exit(0)
