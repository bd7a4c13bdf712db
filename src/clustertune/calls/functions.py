"""Remote functions and refs: ``ct.function(fn).to(cluster, env=...)``.

A call is a run: the run id is the run key on the host. A warm call is one ssh round trip over
the host's multiplexed connection: the env check, the start and the wait happen in one remote
command, and the signed result comes back on its stdout. ``.remote()`` returns a :class:`Ref`
at once; a ref passed to another call is loaded on the host where it was stored.
"""

from __future__ import annotations

import inspect
import json
import os
import posixpath
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.errors import ClusterError, RemoteCallError
from clustertune.calls.backend import BACKEND, RemoteJob, decode_outcome, parse_frame
from clustertune.remote.cluster import EXIT_MISSING, Cluster, _stderr_printer
from clustertune.remote.config import client_id, run_secret
from clustertune.remote.envs import Env
from clustertune.remote.runner import REF_MARK
from clustertune.remote.runner_sockets import _frame, _recv_frame
from clustertune.remote.transport import shell_join
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, remove_run, runs_root


class ConnectionLost(RemoteCallError):
    """The connection dropped during a call; the run goes on remotely (``.run_key`` to reattach)."""

    def __init__(self, message: str, run_key: str):
        super().__init__(message)
        self.run_key = run_key


@dataclass
class Ref:
    """A call's result that stays on the cluster until someone asks for it."""

    run_key: str

    def _job(self) -> RemoteJob:
        return RemoteJob(get_run(self.run_key))

    @property
    def run(self) -> Run:
        return get_run(self.run_key)

    @property
    def node(self) -> int:
        return int((self.run.info.remote or {"nodes": [0]})["nodes"][0])

    def result(self, timeout: float | None = None, stream_logs: bool = False) -> Any:
        return self._job().fetch_result(timeout=timeout, stream=stream_logs)

    def status(self) -> RunState:
        return self._job().state()

    def logs(self, follow: bool = False) -> str | Iterator[str]:
        return self._job().follow() if follow else self._job().logs()

    def cancel(self) -> None:
        self._job().cancel()

    def __repr__(self) -> str:
        return f"Ref({self.run_key!r})"


def get_ref(run_key: str) -> Ref:
    """The ref of an earlier call, from any process (``clustertune runs`` lists run keys)."""
    run = get_run(run_key)
    if run.info.backend != BACKEND:
        raise RemoteCallError(f"run {run.id} is not a remote call (backend {run.info.backend})")
    return Ref(run.id)


def _mark_refs(obj: Any, found: list[str]) -> Any:
    """Replace refs in arguments by markers the host resolves from its own disk."""
    if isinstance(obj, Ref):
        found.append(obj.run_key)
        return (REF_MARK, obj.run_key)
    if isinstance(obj, list):
        return [_mark_refs(o, found) for o in obj]
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(_mark_refs(o, found) for o in obj)
    if isinstance(obj, dict) and type(obj) is dict:
        return {k: _mark_refs(v, found) for k, v in obj.items()}
    return obj


def _function_spec(fn: Any, workdir: Path | None) -> tuple[dict[str, Any], Any]:
    """How the host finds the function: by import path when its module lives in the synced
    folder, else by value (cloudpickle)."""
    if isinstance(fn, str):
        module, sep, qualname = fn.partition(":")
        if not sep or not module or not qualname:
            raise RemoteCallError(f"function {fn!r}: name it 'package.module:function'")
        return {"kind": "import", "module": module, "qualname": qualname}, None
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if workdir is not None and module and module != "__main__" and "<locals>" not in qualname:
        try:
            src = Path(inspect.getfile(fn)).resolve()
        except (TypeError, OSError):
            src = None
        expected = Path(*module.split("."))
        if src is not None and src.is_relative_to(workdir):
            rel = src.relative_to(workdir)
            if rel.with_suffix("") == expected or rel.parent == expected and rel.stem == "__init__":
                return {"kind": "import", "module": module, "qualname": qualname}, None
    return {"kind": "pickle"}, fn


def dumps_by_value(obj: Any, fn: Any) -> bytes:
    """cloudpickle ``obj``, with ``fn``'s own module sent by value: the host need not have it
    (a notebook, a script, a module outside any synced folder)."""
    import sys as _sys

    import cloudpickle

    module = _sys.modules.get(getattr(fn, "__module__", "") or "") if fn is not None else None
    by_value = module is not None and module.__name__ not in ("__main__", "builtins") and \
        not module.__name__.startswith(("clustertune.",)) and module.__name__ not in _registered_by_value()
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(obj)
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _registered_by_value() -> list[Any]:
    import cloudpickle.cloudpickle as cp

    return list(getattr(cp, "_PICKLE_BY_VALUE_MODULES", ()))


def start_remote(cluster: Cluster, nodes: list[int], kind: str, name: str, env: Env, header_extra: dict[str, Any],
                 payload: bytes, wait: bool, stream: bool, workdir: Path | None = None,
                 cwd: str | None = None, refs: list[str] | None = None, run: Run | None = None,
                 node_header: Callable[[int], dict[str, Any]] | None = None) -> tuple[Run, dict[int, Any]]:
    """Create the local run (or take ``run``), start it on ``nodes``; returns the run and each
    node's answer. ``node_header(i)`` adds node-specific fields (a node's own command)."""
    from concurrent.futures import ThreadPoolExecutor

    runtime_vars = env.runtime_vars()
    created = run is None
    if run is None:
        run = Run.create(runs_root(), name, f"remote_{kind}", "", [kind, name], backend=BACKEND)
    run.set_remote({
        "cluster": cluster.name, "kind": kind, "nodes": nodes, "client": client_id(),
        "hosts": [h.to_dict() for h in cluster.hosts],
        "env_vars": sorted(runtime_vars),  # names only: values never land in files
    }, backend=BACKEND)
    key = run.id
    header = {"secret": run_secret(key), "env": runtime_vars, "client": client_id(),
              "refs": {k: run_secret(k) for k in (refs or [])}, **header_extra}

    def one(i: int) -> Any:
        hdr = _node_header(cluster, i, header, node_header, workdir, cwd)
        data = json.dumps(hdr).encode() + b"\n" + payload
        if kind == "call" and wait and not stream and os.environ.get("CLUSTERTUNE_SSH_AGENT", "1") != "0":
            answer = _call_via_agent(cluster, i, env, key, hdr, payload)
            if answer is not None:
                return answer
        return _start_on_host(cluster, i, env, key, kind, data, wait=wait, stream=stream, several=len(nodes) > 1)

    futures: list[Future[Any]] = []
    try:
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:  # leaving it waits for every host
            futures = [pool.submit(one, i) for i in nodes]
        answers = {i: f.result() for i, f in zip(nodes, futures)}  # the first host's error, if any
    except ConnectionLost:
        run.start_attempt(job_id=key)
        raise
    except BaseException as exc:
        if created and futures and not any(_may_have_started(f) for f in futures):
            # Nothing started on any host: no logs, no result, nothing to follow. A run made
            # here for it would only be a FAILED entry in `clustertune runs` (the error says why).
            remove_run(run.reload(), force=True)
            raise
        run.reload()
        if not run.state.terminal:
            run.transition(RunState.FAILED, reason=f"could not start: {exc}")
        raise
    pids = ",".join(f"{cluster.hosts[i].label}:{a.get('pid', '') if isinstance(a, dict) else ''}" for i, a in answers.items())
    run.start_attempt(job_id=f"{key}@{pids}")
    return run, answers


def _may_have_started(f: Future[Any]) -> bool:
    """Whether a host's start may have started the run there: it did, its connection was lost
    after the start, or it is not known (interrupted while waiting). Any other error of
    :func:`_start_on_host` comes before anything starts."""
    if not f.done():
        return True
    if f.cancelled():
        return False
    exc = f.exception()
    return exc is None or isinstance(exc, ConnectionLost)


def _node_header(cluster: Cluster, i: int, header: dict[str, Any],
                 node_header: Callable[[int], dict[str, Any]] | None, workdir: Path | None,
                 cwd: str | None) -> dict[str, Any]:
    """The start header for host ``i``: the shared one, the node's own fields, its directories."""
    out = dict(header)
    if node_header is not None:
        out.update(node_header(i))
    if workdir is not None:
        snap = cluster.snapshot(i, workdir)
        out["cwd"] = snap
        if out.get("function", {}).get("kind") == "import":
            out["function"] = {**out["function"], "sys_path": [snap]}
    if cwd is not None:
        out["cwd"] = cluster.remote_path(i, cwd)
    return out


def _start_on_host(cluster: Cluster, i: int, env: Env, key: str, kind: str, data: bytes, *, wait: bool,
                   stream: bool, several: bool) -> Any:
    """Start run ``key`` on host ``i`` through its helper; its answer (the result frame when
    ``wait``). A connection lost after the start raises :class:`ConnectionLost`."""
    _, py = cluster.env_python(i, env)
    argv = [py, cluster.runner_path(i), "start", cluster.root(i), key, "--kind", kind]
    argv += (["--wait"] if wait else []) + (["--stream"] if stream else [])
    # One round trip when warm: the helper and env checks ride along with the start.
    cmd = shell_join(["test", "-f", cluster.runner_path(i)], "&&", cluster.env_ready_test(i, env),
                     "||", f"exit {EXIT_MISSING};", "exec", argv)
    prefix = f"[{cluster.hosts[i].label}] " if several else ""
    printer = _stderr_printer(prefix, to_stdout=kind == "exec") if stream else None

    def repair() -> None:
        cluster.ensure_runner(i)
        cluster.ensure_env(i, env, stream=True)

    try:
        r = cluster.run_or_repair(i, cmd, input=data, on_stderr=printer, repair=repair)
    except ClusterError as exc:
        # Did the run start before the connection went? Then it goes on remotely.
        st = _status_quietly(cluster, i, key)
        if st in (None, "UNKNOWN"):
            raise
        raise ConnectionLost(f"connection to {cluster.hosts[i].label} lost during run {key}; it goes on "
                             f"remotely: `clustertune logs {key} --follow`, or get_ref({key!r}).result() "
                             f"({exc})", key) from None
    if r.rc == EXIT_MISSING:  # the check before the start says nothing of its own
        raise RemoteCallError(f"{cluster.hosts[i].label}: could not start run {key}: clustertune's helper "
                              f"({cluster.runner_path(i)}) or the env's Python ({py}) is still missing there after "
                              f"they were set up; check that the host's root {cluster.root(i)!r} is writable and "
                              f"stays there (`clustertune cluster check {cluster.name}`)")
    if r.rc != 0:
        raise RemoteCallError(f"{cluster.hosts[i].label}: could not start run {key} (exit {r.rc}): {r.err.strip()[-1500:]}")
    if wait:
        return parse_frame(r.stdout)
    return json.loads(r.text.strip().splitlines()[-1])


def _call_via_agent(cluster: Cluster, i: int, env: Env, key: str, header: dict[str, Any],
                    payload: bytes) -> tuple[dict[str, Any], bytes] | None:
    """A sync call through the host's agent; None when the agent is not usable (the caller
    then starts the call the plain way: nothing had started yet)."""
    import socket

    try:
        path = cluster.agent_socket(i, env)
    except ClusterError:
        return None
    request = _frame(json.dumps({**header, "key": key}).encode() + b"\n" + payload)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn = cluster.conn(i)
    try:
        s.connect(path)
        s.sendall(request)
        accepted = _recv_frame(s)
    except (OSError, ConnectionError):
        s.close()
        cluster.forget_agent(i, env)  # stale forward or agent gone: rebuilt on the next call
        return None
    if accepted.startswith(b"refused\n"):
        s.close()
        reason = accepted.split(b"\n", 1)[1].decode("utf-8", "replace")
        raise RemoteCallError(f"{cluster.hosts[i].label}: could not start run {key}: {reason}")
    try:
        if accepted != b"accepted":
            raise ConnectionError(f"unexpected agent answer {accepted[:40]!r}")
        reply = _recv_frame(s)
    except (OSError, ConnectionError) as exc:
        cluster.forget_agent(i, env)
        raise ConnectionLost(f"connection to {cluster.hosts[i].label} lost during run {key}; it goes on remotely: "
                             f"`clustertune logs {key} --follow`, or get_ref({key!r}).result() ({exc})", key) from None
    finally:
        s.close()
    conn.bytes_sent += len(request)
    conn.bytes_received += len(reply) + len(accepted) + 16
    return parse_frame(reply)


def _status_quietly(cluster: Cluster, i: int, key: str) -> str | None:
    try:
        return cluster.helper_json(i, "status", key).get("state")
    except ClusterError:
        return None


class Function:
    """``ct.function(fn)``: a local function (or ``"pkg.module:name"``) to run on a cluster."""

    def __init__(self, fn: Callable[..., Any] | str):
        if not (callable(fn) or isinstance(fn, str)):
            raise RemoteCallError(f"ct.function needs a function or 'module:name', not {type(fn).__name__}")
        self.fn = fn

    def to(self, cluster: Cluster | str, env: Env | list[str] | None = None, host: int | str | None = None,
           workdir: str | os.PathLike[str] | None = None, gpus: int = 0, name: str | None = None) -> BoundFunction:
        c = cluster if isinstance(cluster, Cluster) else Cluster.named(cluster)
        return BoundFunction(self.fn, c, Env.of(env), c.host_index(host),
                             Path(workdir).expanduser().resolve() if workdir else None, gpus, name)


class BoundFunction:
    def __init__(self, fn: Any, cluster: Cluster, env: Env, host: int, workdir: Path | None, gpus: int, name: str | None):
        if workdir is not None and not workdir.is_dir():
            raise ClusterError(f"workdir {workdir}: not a folder")
        self.fn, self.cluster, self.env, self.host, self.workdir, self.gpus = fn, cluster, env, host, workdir, gpus
        self.name = name or (fn.partition(":")[2] if isinstance(fn, str) else getattr(fn, "__name__", "call"))
        self.spec, self.by_value = _function_spec(fn, workdir)

    def _start(self, args: tuple, kwargs: dict, wait: bool, stream: bool) -> tuple[Run, Any]:
        refs: list[str] = []
        args_m = _mark_refs(list(args), refs)
        kwargs_m = _mark_refs(dict(kwargs), refs)
        node = self.host
        if refs:
            ref_nodes = {Ref(k).node for k in refs}
            ref_clusters = {(get_run(k).info.remote or {}).get("cluster") for k in refs}
            if len(ref_nodes) > 1 or ref_clusters != {self.cluster.name}:
                raise RemoteCallError(f"refs {refs} live on different hosts/clusters; a call can only load refs "
                                      "stored on the host it runs on")
            node = ref_nodes.pop()  # run where the data is: it never travels
        payload = dumps_by_value((self.by_value, tuple(args_m), kwargs_m), self.by_value)
        run, answers = start_remote(self.cluster, [node], "call", self.name, self.env,
                                    {"function": self.spec, "gpus_wanted": self.gpus}, payload, wait, stream,
                                    workdir=self.workdir, refs=refs)
        return run, answers[node]

    def __call__(self, *args: Any, stream_logs: bool = False, **kwargs: Any) -> Any:
        run, (head, data) = self._start(args, kwargs, wait=True, stream=stream_logs)
        job = RemoteJob(run)
        state = {"COMPLETED": RunState.COMPLETED, "FAILED": RunState.FAILED, "CANCELLED": RunState.CANCELLED}.get(head.get("state"))
        if state is not None:
            job._record(state, head.get("reason"))
        return decode_outcome(run.id, head, data, self.cluster.hosts[int((run.info.remote or {"nodes": [0]})["nodes"][0])].label)

    def remote(self, *args: Any, **kwargs: Any) -> Ref:
        run, _ = self._start(args, kwargs, wait=False, stream=False)
        return Ref(run.id)


def function(fn: Callable[..., Any] | str) -> Function:
    """``ct.function(fn).to(cluster, env=[...])``: call ``fn`` on the cluster."""
    return Function(fn)


def remote_exec(cluster: Cluster, argv: list[str], hosts: list[int] | None = None, env: Env | None = None,
                workdir: Path | None = None, cwd: str | None = None, wait: bool = True,
                stream: bool = True, gpus: int = 0) -> tuple[Run, dict[int, Any]]:
    """Run a command on some or all hosts (env activated) as one run; returns per-host answers.
    ``gpus``: that many free devices on each host, in ``CUDA_VISIBLE_DEVICES``."""
    if not argv:
        raise RemoteCallError(f"exec needs a command: `clustertune exec {cluster.name} -- CMD ARGS...`")
    if gpus < 0:
        raise RemoteCallError(f"gpus={gpus}: give a number of GPUs, 0 or more")
    nodes = hosts if hosts is not None else list(range(len(cluster.hosts)))
    run, answers = start_remote(cluster, nodes, "exec", posixpath.basename(argv[0]) or "exec", env or Env(),
                                {"argv": list(argv), "gpus_wanted": gpus}, b"", wait, stream, workdir=workdir, cwd=cwd)
    if wait:
        codes = {i: head.get("exit_code") for i, (head, _) in answers.items()}
        final = RunState.COMPLETED if all(c == 0 for c in codes.values()) else RunState.FAILED
        RemoteJob(run)._record(final, None if final is RunState.COMPLETED else f"exit codes {codes}")
    return run, answers


__all__ = ["ConnectionLost", "Function", "Ref", "function", "get_ref", "remote_exec"]
