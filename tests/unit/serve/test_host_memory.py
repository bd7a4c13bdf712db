"""The server's arenas keep what a request freed: the next request's tensors fault no pages in."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A worker thread (as the Tinker API's and the batching manager's are) running a small model's
# forward and backward per "request"; the page faults it took, counted by the kernel for that
# thread, in a process as glibc comes or one that called keep_freed_memory() first (as the server
# does, before any of its threads allocates).
CHILD = """
import resource, sys, threading
import torch
from clustertune.serve.host_memory import keep_freed_memory

if sys.argv[1] == "keep":
    assert keep_freed_memory(), "glibc's mallopt refused the settings"

torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(),
                                                  torch.nn.Linear(512, 128)) for _ in range(4)],
                            torch.nn.Linear(128, 512))
x = torch.randn(40, 27, 128)
out = []

def requests(n):
    for _ in range(3):  # warm up
        model(x).logsumexp(-1).sum().backward()
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(n):
        model(x).logsumexp(-1).sum().backward()
    out.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)

t = threading.Thread(target=requests, args=(40,))
t.start()
t.join()
print(out[0])
"""


def faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc and per-thread fault counts")
def test_freed_memory_is_kept_for_the_next_request() -> None:
    plain, kept = faults("plain"), faults("keep")
    # As glibc comes, each request maps its activations afresh (hundreds of pages); kept, the
    # thread's arena serves them again.
    assert plain > 40 * 200, plain
    assert kept < plain / 4, (kept, plain)
