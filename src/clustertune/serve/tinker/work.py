"""The server's one line of work: requests queued per client, done one at a time, clients in turn.

Every call that touches the weights (forward/backward, an optimizer step, sampling, saving and
loading) is queued here and done on one worker thread, so a base model shared by several
clients is never used by two requests at once. Clients take turns (round robin over the
clients with queued work), so a client that queues a hundred requests delays another client by
one request, not a hundred. Within one client, requests run in the order of their ``seq_id``
(the SDK numbers them; HTTP may deliver them out of order), else in arrival order.

The HTTP side gets a request id at once and polls for the result (the SDK's futures).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("clustertune.serve.tinker")

# A request whose predecessor (by seq_id) never arrives runs after this long all the same: a
# client that skipped a number (a request it gave up on) must not stall its queue for ever.
GAP_WAIT_S = 5.0
KEEP_RESULTS_S = 3600.0


@dataclass(order=True)
class _Job:
    seq: int
    arrival: int
    request_id: str = field(compare=False)
    fn: Callable[[], Any] = field(compare=False)
    future: Future = field(compare=False)
    queued: float = field(compare=False, default_factory=time.monotonic)


class Work:
    """Queues per client key, one worker thread. ``submit`` returns the request id; ``future``
    finds its :class:`~concurrent.futures.Future` (None once forgotten or never known)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queues: dict[str, list[_Job]] = {}
        self._next_seq: dict[str, int] = {}
        self._passed: dict[str, set[int]] = {}  # seq_ids answered without being queued, per client
        self._turns: deque[str] = deque()
        self._futures: dict[str, tuple[Future, float]] = {}
        self._once: dict[tuple[Any, ...], str] = {}
        self._arrivals = itertools.count()
        self._stopping = False
        self.busy_with: str | None = None
        self._thread = threading.Thread(target=self._loop, name="tinker-work", daemon=True)
        self._thread.start()

    def expect(self, key: str, seq: int) -> None:
        """Requests of ``key`` are numbered from ``seq`` on (a new client's first request)."""
        with self._cond:
            self._next_seq[key] = seq

    def submit(self, key: str, fn: Callable[[], Any], seq: int | None = None, *,
               once: tuple[Any, ...] | None = None) -> str:
        """Queue ``fn`` for ``key``; ``once``: a request sent again (the SDK's retries) gets the
        first one's id instead of running twice."""
        rid = uuid.uuid4().hex
        fut: Future = Future()
        arrival = next(self._arrivals)
        with self._cond:
            self._forget_old()
            if once is not None:
                if once in self._once:
                    return self._once[once]
                self._once[once] = rid
            self._futures[rid] = (fut, time.monotonic())
            queue = self._queues.setdefault(key, [])
            heapq.heappush(queue, _Job(seq if seq is not None else -1, arrival, rid, fn, fut))
            if key not in self._turns:
                self._turns.append(key)
            self._cond.notify()
        return rid

    def pass_over(self, key: str, seq: int) -> None:
        """Request ``seq`` of ``key`` was answered without being queued (refused at the edge): it
        never arrives here, so the requests numbered after it run without waiting for it. Only for
        a client whose numbering is known (:meth:`expect`): a made-up id leaves nothing behind."""
        with self._cond:
            expected = self._next_seq.get(key)
            if expected is not None and seq >= expected:
                self._passed.setdefault(key, set()).add(seq)
                self._cond.notify()

    def done(self, value: Any) -> str:
        """A request id whose result is ready now (calls answered without queueing)."""
        rid = uuid.uuid4().hex
        fut: Future = Future()
        fut.set_result(value)
        with self._cond:
            self._futures[rid] = (fut, time.monotonic())
        return rid

    def future_of(self, once: tuple[Any, ...]) -> str | None:
        """The request id a ``once`` key was first submitted under, if any."""
        with self._cond:
            return self._once.get(once)

    def future(self, request_id: str) -> Future | None:
        with self._cond:
            hit = self._futures.get(request_id)
        return hit[0] if hit else None

    def queued(self, key: str | None = None) -> int:
        with self._cond:
            if key is not None:
                return len(self._queues.get(key, []))
            return sum(len(q) for q in self._queues.values())

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(10)

    def _forget_old(self) -> None:
        cutoff = time.monotonic() - KEEP_RESULTS_S
        old = {r for r, (f, t) in self._futures.items() if f.done() and t < cutoff}
        for rid in old:
            del self._futures[rid]
        if old:
            self._once = {k: r for k, r in self._once.items() if r not in old}

    def _pick(self) -> tuple[str, _Job] | None:
        """The next job: the first client in turn whose head may run (called under the lock)."""
        now = time.monotonic()
        for _ in range(len(self._turns)):
            key = self._turns[0]
            self._turns.rotate(-1)
            queue = self._queues.get(key)
            if not queue:
                continue
            head = queue[0]
            expected = self._next_seq.get(key)
            passed = self._passed.get(key)
            while expected is not None and passed and expected in passed:
                passed.discard(expected)  # refused at the edge: the next one is due
                expected = self._next_seq[key] = expected + 1
            in_order = head.seq < 0 or expected is None or head.seq <= expected
            if in_order or now - head.queued > GAP_WAIT_S:
                heapq.heappop(queue)
                if head.seq >= 0:
                    self._next_seq[key] = head.seq + 1
                    if passed:  # those before it are behind the client now
                        passed.difference_update([s for s in passed if s <= head.seq])
                if not queue:
                    self._turns.remove(key)
                return key, head
        return None

    def _loop(self) -> None:
        while True:
            with self._cond:
                picked = None
                while picked is None:
                    if self._stopping:
                        return
                    picked = self._pick()
                    if picked is None:
                        # Either nothing is queued, or every head waits for an earlier seq_id.
                        self._cond.wait(0.1 if self._turns else None)
            key, job = picked
            if not job.future.set_running_or_notify_cancel():
                continue
            self.busy_with = key
            try:
                job.future.set_result(job.fn())
            except BaseException as exc:  # noqa: BLE001 - the error travels to the client
                if not isinstance(exc, Exception):
                    job.future.set_exception(RuntimeError(f"{type(exc).__name__}"))
                    raise
                job.future.set_exception(exc)
            finally:
                self.busy_with = None
