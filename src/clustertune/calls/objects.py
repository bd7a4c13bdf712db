"""Remote objects: ``ct.cls(Model).to(cluster, env=...)(*args)`` builds one instance in a
long-lived process on a host (a model loaded once); its methods are then called many times,
sync (``obj.predict(x)``) or async (``obj.predict.remote(x)`` -> a Future), until ``stop()``.

Each method call is one ssh round trip: the host's helper forwards it to the object's process
over a private unix socket, and the answer comes back signed with the object's run key.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clustertune.errors import RemoteCallError
from clustertune.calls.backend import RemoteJob, decode_outcome, parse_frame
from clustertune.remote.cluster import Cluster
from clustertune.remote.envs import Env
from clustertune.calls.functions import _function_spec, _mark_refs, dumps_by_value, start_remote
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run


class RemoteClass:
    def __init__(self, klass: type | str):
        self.klass = klass

    def to(self, cluster: Cluster | str, env: Env | list[str] | None = None, host: int | str | None = None,
           workdir: str | os.PathLike[str] | None = None, gpus: int = 0) -> BoundClass:
        c = cluster if isinstance(cluster, Cluster) else Cluster.named(cluster)
        return BoundClass(self.klass, c, Env.of(env), c.host_index(host), Path(workdir).resolve() if workdir else None, gpus)


class BoundClass:
    def __init__(self, klass: Any, cluster: Cluster, env: Env, host: int, workdir: Path | None, gpus: int):
        self.klass, self.cluster, self.env, self.host, self.workdir, self.gpus = klass, cluster, env, host, workdir, gpus

    def __call__(self, *args: Any, **kwargs: Any) -> RemoteObject:
        spec, by_value = _function_spec(self.klass, self.workdir)
        refs: list[str] = []
        payload = dumps_by_value((by_value, tuple(_mark_refs(list(args), refs)), _mark_refs(dict(kwargs), refs)), by_value)
        name = getattr(self.klass, "__name__", "object")
        run, answers = start_remote(self.cluster, [self.host], "serve", name, self.env,
                                    {"function": spec, "gpus_wanted": self.gpus}, payload, wait=False, stream=False,
                                    workdir=self.workdir, refs=refs)
        answer = answers[self.host]
        if answer.get("state") != "RUNNING":
            job = RemoteJob(run)
            job.state()
            tb = answer.get("traceback") or answer.get("reason") or ""
            raise RemoteCallError(f"{name}(...) failed on {self.cluster.hosts[self.host].label} (run {run.id}):\n{tb}")
        return RemoteObject(run.id, self.cluster, self.host)


class _Method:
    def __init__(self, obj: RemoteObject, name: str):
        self._obj, self._name = obj, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._obj._invoke(self._name, args, kwargs)

    def remote(self, *args: Any, **kwargs: Any) -> Future:
        """Call without waiting: a Future of the value."""
        return self._obj._pool().submit(self._obj._invoke, self._name, args, kwargs)


class RemoteObject:
    """A live instance on a host; attribute access gives its methods."""

    def __init__(self, run_key: str, cluster: Cluster, host: int):
        self.run_key, self._cluster, self._host = run_key, cluster, host
        self._executor: ThreadPoolExecutor | None = None

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=8)
        return self._executor

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self, name)

    def _invoke(self, name: str, args: tuple, kwargs: dict) -> Any:
        import cloudpickle

        c, i = self._cluster, self._host
        r = c.helper(i, "invoke", self.run_key, input=cloudpickle.dumps((name, args, kwargs)))
        if r.rc == 4:
            raise RemoteCallError(f"object {self.run_key} is not running on {c.hosts[i].label}: {r.err.strip()}")
        if r.rc != 0:
            raise RemoteCallError(f"{c.hosts[i].label}: calling {name} on object {self.run_key} failed: {r.err.strip()[-1500:]}")
        head, data = parse_frame(r.stdout)
        return decode_outcome(self.run_key, head, data, c.hosts[i].label)

    def stop(self) -> None:
        """End the object's process (its run ends COMPLETED)."""
        self._invoke("__stop__", (), {})
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        job = RemoteJob(self.run)
        job.wait(timeout=30)

    @property
    def run(self):  # noqa: ANN201

        return get_run(self.run_key)

    def status(self) -> RunState:
        return RemoteJob(self.run).state()

    def __repr__(self) -> str:
        return f"RemoteObject({self.run_key!r})"


def cls(klass: type | str) -> RemoteClass:
    return RemoteClass(klass)
