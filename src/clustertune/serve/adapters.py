"""Many adapters on one base: the base is loaded once, each adapter run's LoRA weights are loaded
beside it (by PEFT, in place in the base's layers), and a request's ``model`` picks the one that
answers it: an adapter run's id, or the base's own id for the base alone.

transformers' continuous batching runs one model, so its batch answers for one adapter at a time.
:class:`Turns` keeps that rule fairly: a request for the adapter in use joins the batch at once
unless a request for another came before it; a request for another adapter waits until the batch
holds none of the current one's, then the batch is paused between two steps, the adapter switched
(loaded first if it is not yet), and every waiting request for it joins. Requests for one adapter
are batched together; requests for different ones take turns, with no reload.

An adapter run that finished after the server started is served by its run id on first use. Past
``max_adapters`` loaded, the one used longest ago is unloaded (it loads again when asked for).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.serve.protocol import ApiError

BASE = ""  # the key of the base model alone (no adapter)


@dataclass(frozen=True)
class AdapterRef:
    """An adapter run the server may load: its served id, its directory and what found it (a
    :class:`~clustertune.use.load.Target`: its tokenizer and chat template come from there)."""

    id: str
    path: Path
    target: Any


class Turns:
    """Which adapter the batch answers for, and whose turn comes next (see the module's text).
    ``switch(key)`` runs in a thread, with no request in the batch, before the first request of
    ``key`` is admitted."""

    def __init__(self, switch: Callable[[str], None]):
        self._switch = switch
        self.active = BASE
        self.running = 0
        self._waiting: collections.deque[list[str]] = collections.deque()  # one box per waiter, in arrival order
        self._cond: asyncio.Condition | None = None

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        """Admitted for ``key`` for the block (its requests run meanwhile)."""
        if self._cond is None:
            self._cond = asyncio.Condition()
        cond = self._cond
        me = [key]
        async with cond:
            self._waiting.append(me)
            try:
                while True:
                    ahead = list(self._waiting)[:self._waiting.index(me)]
                    if self.active == key and all(w[0] == key for w in ahead):
                        break
                    if self.running == 0 and not ahead:  # first in line and the batch is empty: switch
                        await asyncio.to_thread(self._switch, key)
                        self.active = key
                        break
                    await cond.wait()
            finally:
                self._waiting.remove(me)
                cond.notify_all()
            self.running += 1
        try:
            yield
        finally:
            async with cond:
                self.running -= 1
                cond.notify_all()


class AdapterSet:
    """The adapters of one served base: which are loaded (least recently used first), loading,
    switching and unloading them on the shared model. ``lookup(model_id)`` finds an adapter run
    not listed at start (None: not one this base can serve); ``discover()`` lists the ids of
    those there are now."""

    def __init__(self, listed: list[AdapterRef], max_adapters: int, lookup: Callable[[str], AdapterRef | None],
                 discover: Callable[[], list[str]] = list):
        if max_adapters < 1:
            raise ValueError("max_adapters must be at least 1")
        self.known: dict[str, AdapterRef] = {a.id: a for a in listed}
        self.max_adapters = max_adapters
        self._lookup = lookup
        self._discover = discover
        self.loaded: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.peft: Any = None  # the PeftModel over the base, once an adapter is loaded
        self._lock = threading.Lock()

    def load_listed(self, base_model: Any) -> None:
        """The adapters named at start (as many as may be loaded), loaded before the first request;
        the base alone answers until a request names one."""
        for ref in list(self.known.values())[:self.max_adapters]:
            self._load(base_model, ref)
        if self.peft is not None:
            self.peft.base_model.disable_adapter_layers()

    def servable(self) -> list[str]:
        """The ids of every adapter this base can serve: those named or asked for so far, then the
        adapter runs of the base found since (loaded when first asked for)."""
        ids = list(self.known)
        return ids + [i for i in self._discover() if i not in self.known]

    def find(self, model_id: str) -> AdapterRef | None:
        ref = self.known.get(model_id)
        if ref is None:
            ref = self._lookup(model_id)
            if ref is not None:
                self.known[ref.id] = ref
        return ref

    def switch(self, base_model: Any, key: str, pause: Callable[[], Any]) -> None:
        """Make ``key`` the adapter the model answers with (BASE: none), loading it if needed;
        called with no request in the batch, the batch held between two steps meanwhile."""
        with self._lock, pause():
            if key == BASE:
                if self.peft is not None:
                    self.peft.base_model.disable_adapter_layers()
                return
            if key not in self.loaded:
                self._load(base_model, self.known[key])
            self.loaded.move_to_end(key)
            self.peft.base_model.enable_adapter_layers()
            self.peft.set_adapter(key)
            while len(self.loaded) > self.max_adapters:
                old, _ = self.loaded.popitem(last=False)
                self.peft.delete_adapter(old)

    def _load(self, base_model: Any, ref: AdapterRef) -> None:
        import warnings

        from peft import PeftModel

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
            try:
                if self.peft is None:
                    # Injected in place: the base model the batch runs now holds the adapter's layers.
                    self.peft = PeftModel.from_pretrained(base_model, str(ref.path), adapter_name=ref.id)
                else:
                    self.peft.load_adapter(str(ref.path), adapter_name=ref.id)
            except Exception as exc:  # an unreadable or mismatched adapter: that request fails, the server goes on
                self.known.pop(ref.id, None)
                raise ApiError(500, f"adapter {ref.id} could not be loaded on the served base: "
                                    f"{type(exc).__name__}: {exc}", kind="server_error") from None
        base_model.eval()  # the adapter's own layers too (their dropout off)
        self.loaded[ref.id] = None
