"""The remote half of clustertune's SSH backend: one self-contained file, copied to each host.

It needs only the standard library and cloudpickle, which is shipped beside it (this file's
folder is first on ``sys.path`` when it runs as a script). The client runs it as
``PYTHON runner.py VERB ROOT [KEY] [options]``; anything secret (per-run signing keys, the
values of secret environment variables) comes on stdin as the first JSON line, never in argv.

Layout under ROOT (the host's clustertune root)::

    lib/runner-<hash>.py      this file
    envs/<hash>/              virtualenvs, keyed by a hash of their spec (``.ready`` when built)
    code/<hash>/              code snapshots (a run sees the code as it was when it started)
    runs/<KEY>/               one directory per run key: meta.json, state.json, log,
                              result.pkl + result.sig (signed with the run's key), sock (objects)

A call is forked into its own session (``setsid``) with its output going to ``log``: when the
ssh connection drops, the work goes on, and ``result``/``logs`` reattach by key.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback

REF_MARK = "__clustertune_ref_v1__"
EXIT_MISSING = 97  # the client reads this as "runner or env missing here: set them up"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
CANCEL_MARK = "cancel-requested"  # in a run's directory: a cancel is under way


# -- small helpers ------------------------------------------------------------------------------


def _write_atomic(path: str, data: bytes, mode: int = 0o600) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _read_json(path: str, default=None):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _sign(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def _run_dir(root: str, key: str) -> str:
    if not key or "/" in key or key in (".", ".."):
        raise SystemExit(f"runner: bad run key {key!r}")
    return os.path.join(root, "runs", key)


# As clustertune.runs.run names it (this helper is standard library only and imports nothing of ours).
CANCELLED_BY_USER = "cancelled by user (`clustertune cancel`)"


def _set_state(rdir: str, state: str, **extra) -> None:
    info = _read_json(os.path.join(rdir, "state.json"), {}) or {}
    if info.get("state") in TERMINAL and state != info.get("state"):
        return  # first terminal state wins (a cancel racing the end of the work)
    info.update(extra)
    info["state"] = state
    info["updated"] = time.time()
    _write_atomic(os.path.join(rdir, "state.json"), json.dumps(info).encode())


def _status(rdir: str) -> dict:
    info = _read_json(os.path.join(rdir, "state.json"))
    if info is None:
        return {"state": "UNKNOWN"}
    if info.get("state") == "RUNNING" and info.get("pid") and not _pid_alive(int(info["pid"])):
        if os.path.exists(os.path.join(rdir, CANCEL_MARK)):  # a cancel killed it and has not written yet
            _set_state(rdir, "CANCELLED", reason=CANCELLED_BY_USER)
        else:
            _set_state(rdir, "FAILED", reason="the remote process ended without reporting (killed or host rebooted)")
        info = _read_json(os.path.join(rdir, "state.json"))
    return info


def _read_header() -> dict:
    line = sys.stdin.buffer.readline()
    return json.loads(line) if line.strip() else {}


# -- the work itself (in the forked child) --------------------------------------------------------


def _load_ref(root: str, key: str, secret: str, timeout: float = 86400.0):
    import pickle

    rdir = _run_dir(root, key)
    deadline = time.time() + timeout
    while _status(rdir).get("state") not in TERMINAL:
        if time.time() > deadline:
            raise RuntimeError(f"argument {key} did not finish in time")
        time.sleep(0.2)
    st = _status(rdir)
    if st.get("state") != "COMPLETED":
        raise RuntimeError(f"argument {key} is {st.get('state')}: {st.get('reason', '')}")
    with open(os.path.join(rdir, "result.pkl"), "rb") as fh:
        data = fh.read()
    with open(os.path.join(rdir, "result.sig")) as fh:
        sig = fh.read().strip()
    if not hmac.compare_digest(sig, _sign(secret, data)):
        raise RuntimeError(f"argument {key}: its stored result is not signed by this client; refusing to load it")
    kind, value = pickle.loads(data)[:2]
    return value


def _resolve(obj, root: str, refs: dict):
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == REF_MARK:
        key = obj[1]
        return _load_ref(root, key, refs[key])
    if isinstance(obj, list):
        return [_resolve(o, root, refs) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_resolve(o, root, refs) for o in obj)
    if isinstance(obj, dict):
        return {k: _resolve(v, root, refs) for k, v in obj.items()}
    return obj


def _find_function(spec: dict, fn):
    if spec.get("kind") != "import":
        return fn
    import importlib

    for p in reversed(spec.get("sys_path", [])):
        if p not in sys.path:
            sys.path.insert(0, p)
    module_name, qualname = spec["module"], spec["qualname"]
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"function {module_name}:{qualname} not found on this host: cannot import {module_name!r} "
                          f"({exc}); sync the folder that holds it (sys.path: {sys.path[:4]})") from None
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LookupError(f"function {module_name}:{qualname} not found on this host: "
                              f"{module_name} has no {qualname!r}") from None
    return obj


def _outcome_bytes(kind: str, value, tb: str = "") -> bytes:
    import cloudpickle

    try:
        return cloudpickle.dumps((kind, value, tb))
    except Exception as exc:  # an unpicklable result or exception: keep its text
        text = f"{type(value).__name__}: {value}" if kind == "err" else f"result not picklable: {exc}"
        return cloudpickle.dumps(("err", None, tb or text, text))


# launch.env references, the rule of clustertune.launch.plan.expand_env_value (this file is
# self-contained): $NAME and ${NAME} expand, $$ is a literal $, nothing else is interpreted.
_ENV_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _apply_env(env: dict, expand: list, environ) -> None:
    """Set ``env``; the names in ``expand`` (sorted, as a SLURM script exports them) expand
    their references against what is set before them. Secrets are never expanded."""
    for name, value in env.items():
        if name not in expand:
            environ[name] = value
    for name in expand:
        environ[name] = _ENV_REFERENCE.sub(
            lambda m: "$" if m.group() == "$$" else environ.get(m.group(1) or m.group(2), ""), env[name])


def _child_setup(rdir: str, header: dict) -> None:
    os.setsid()
    log_fd = os.open(os.path.join(rdir, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), line_buffering=True, write_through=True)
    _apply_env(header.get("env") or {}, header.get("expand_env") or [], os.environ)
    if header.get("gpus") is not None:  # picked by the parent, before the run existed
        # nvidia-smi numbers devices in PCI bus order; CUDA's default order may differ.
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in header["gpus"])
    cwd = header.get("cwd")
    if cwd:
        os.chdir(cwd)


def _gpus():
    try:  # on a host: shipped beside this file
        import _clustertune_runner_gpus as mod
    except ImportError:
        from clustertune.remote import runner_gpus as mod  # here, not on a host: the package's own copy
    return mod


def _child_call(root: str, rdir: str, header: dict, payload: bytes) -> int:
    import pickle

    secret = header["secret"]
    try:
        fn, args, kwargs = pickle.loads(payload)
        fn = _find_function(header.get("function", {}), fn)
        args = _resolve(args, root, header.get("refs", {}))
        kwargs = _resolve(kwargs, root, header.get("refs", {}))
        value = fn(*args, **kwargs)
        data = _outcome_bytes("ok", value)
    except BaseException as exc:  # noqa: BLE001 - everything the user's code raises goes back to them
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        data = _outcome_bytes("err", exc, tb)
    _write_atomic(os.path.join(rdir, "result.pkl"), data)
    _write_atomic(os.path.join(rdir, "result.sig"), _sign(secret, data).encode())
    ok = pickle.loads(data)[0] == "ok"
    _set_state(rdir, "COMPLETED" if ok else "FAILED", **({} if ok else {"reason": "the function raised"}))
    return 0


def _child_exec(rdir: str, header: dict) -> int:
    argv = header["argv"]
    # "Activate" the env this helper runs in: its bin/ first on PATH.
    env_bin = os.path.dirname(sys.executable)
    os.environ["PATH"] = env_bin + os.pathsep + os.environ.get("PATH", "")
    os.environ["VIRTUAL_ENV"] = os.path.dirname(env_bin)
    try:
        rc = subprocess.call(argv)
    except OSError as exc:
        print(f"clustertune exec: cannot run {argv[0]!r}: {exc}", flush=True)
        rc = 127
    _set_state(rdir, "COMPLETED" if rc == 0 else "FAILED", exit_code=rc,
               **({} if rc == 0 else {"reason": f"command exited with {rc}"}))
    return rc


def _sockets():
    try:  # on a host: shipped beside this file
        import _clustertune_runner_sockets as mod
    except ImportError:
        from clustertune.remote import runner_sockets as mod  # here, not on a host: the package's own copy
    mod.base = sys.modules[__name__]  # the sockets half calls back into this helper
    return mod


def _emit_result(rdir: str) -> int:
    """stdout: one JSON line (state, signature), then the signed result bytes."""
    st = _status(rdir)
    data, sig = b"", ""
    if os.path.exists(os.path.join(rdir, "result.pkl")):
        with open(os.path.join(rdir, "result.pkl"), "rb") as fh:
            data = fh.read()
        with open(os.path.join(rdir, "result.sig")) as fh:
            sig = fh.read().strip()
    head = {"state": st.get("state"), "reason": st.get("reason"), "exit_code": st.get("exit_code"), "sig": sig}
    sys.stdout.buffer.write(json.dumps(head).encode() + b"\n" + data)
    sys.stdout.buffer.flush()
    return 0


def _tail(rdir: str, offset: int, until_done: bool, out, poll: float = 0.1, child: int = 0) -> int:
    path = os.path.join(rdir, "log")
    while True:
        done = False
        if child:
            pid, _ = os.waitpid(child, os.WNOHANG)
            done = pid != 0
        else:
            done = _status(rdir).get("state") in TERMINAL
        if os.path.exists(path):
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            if chunk:
                offset += len(chunk)
                out.write(chunk)
                out.flush()
        if done or not until_done:
            return offset
        time.sleep(poll)


def _fork_run(root: str, key: str, kind: str, header: dict, payload: bytes) -> tuple:
    """Create the run directory and fork the run into its own session; (run dir, pid)."""
    rdir = _run_dir(root, key)
    if header.get("gpus_wanted"):
        # Picked here, before the run exists: a host that cannot serve the call says so at once.
        try:
            header["gpus"] = _gpus().pick_free_gpus(_gpus().query_gpus(), int(header["gpus_wanted"]))
        except LookupError as exc:
            raise SystemExit(f"runner: {exc}") from None
    try:
        os.makedirs(rdir)
    except FileExistsError:
        raise SystemExit(f"runner: run key {key} exists already on this host") from None
    _write_atomic(os.path.join(rdir, "meta.json"), json.dumps({"kind": kind, "created": time.time(),
                                                                "client": header.get("client")}).encode())
    _set_state(rdir, "RUNNING", pid=0, kind=kind)
    pid = os.fork()
    if pid == 0:
        rc = 1
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _child_setup(rdir, header)
            _set_state(rdir, "RUNNING", pid=os.getpid(), kind=kind)
            if kind == "call":
                rc = _child_call(root, rdir, header, payload)
            elif kind == "exec":
                rc = _child_exec(rdir, header)
            else:
                rc = _sockets()._child_serve(root, rdir, header, payload)
        except BaseException:  # noqa: BLE001 - the child must never return into the parent's code
            traceback.print_exc()
            _set_state(rdir, "FAILED", reason="runner error: " + traceback.format_exc(limit=1).strip().splitlines()[-1])
        finally:
            os._exit(rc)
    # The child records its own pid: a write here could race with its final state.
    return rdir, pid


def verb_start(root: str, key: str, kind: str, wait: bool, stream: bool) -> int:
    header = _read_header()
    payload = sys.stdin.buffer.read()
    rdir, pid = _fork_run(root, key, kind, header, payload)
    if not wait:
        if kind == "serve":  # return once the object exists (or failed to)
            while _status(rdir).get("state") == "RUNNING" and not _status(rdir).get("serving"):
                time.sleep(0.02)
        sys.stdout.write(json.dumps({"pid": pid, **_status(rdir)}) + "\n")
        return 0
    if stream:
        _tail(rdir, 0, True, sys.stderr.buffer, child=pid)
    else:
        os.waitpid(pid, 0)
    return _emit_result(rdir)


def verb_result(root: str, key: str, timeout: float, stream: bool) -> int:
    rdir = _run_dir(root, key)
    if not os.path.isdir(rdir):
        print(f"no run {key} on this host", file=sys.stderr)
        return 3
    deadline = time.time() + timeout
    offset = 0
    while _status(rdir).get("state") not in TERMINAL and time.time() < deadline:
        if stream:
            offset = _tail(rdir, offset, False, sys.stderr.buffer)
        time.sleep(0.1)
    if stream:
        _tail(rdir, offset, False, sys.stderr.buffer)
    return _emit_result(rdir)


def verb_status(root: str, key: str) -> int:
    rdir = _run_dir(root, key)
    if not os.path.isdir(rdir):
        print(json.dumps({"state": "UNKNOWN"}))
        return 3
    print(json.dumps(_status(rdir)))
    return 0


def verb_logs(root: str, key: str, offset: int, follow: bool) -> int:
    rdir = _run_dir(root, key)
    if not os.path.isdir(rdir):
        print(f"no run {key} on this host", file=sys.stderr)
        return 3
    _tail(rdir, offset, follow, sys.stdout.buffer, poll=0.2)
    return 0


def verb_cancel(root: str, key: str) -> int:
    rdir = _run_dir(root, key)
    if not os.path.isdir(rdir):
        print(f"no run {key} on this host", file=sys.stderr)
        return 3
    st = _status(rdir)
    pid = int(st.get("pid") or 0)
    if st.get("state") not in TERMINAL and pid:
        # Marked first: whoever sees the process gone (this verb, a status, a follower) records a cancel.
        _write_atomic(os.path.join(rdir, CANCEL_MARK), b"")
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.time() + wait
            while _pid_alive(pid) and time.time() < deadline:
                time.sleep(0.05)
            if not _pid_alive(pid):
                break
        _set_state(rdir, "CANCELLED", reason=CANCELLED_BY_USER)
    print(json.dumps(_status(rdir)))
    return 0


def _host():
    try:  # on a host: shipped beside this file
        import _clustertune_runner_host as mod
    except ImportError:
        from clustertune.remote import runner_host as mod  # here, not on a host: the package's own copy
    mod.base = sys.modules[__name__]  # the upkeep half calls back into this helper
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="runner")
    ap.add_argument("verb")
    ap.add_argument("root")
    ap.add_argument("key", nargs="?")
    ap.add_argument("--kind", default="call")
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--follow", action="store_true")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=86400.0)
    ap.add_argument("--older-than-days", type=float, default=7.0)
    ap.add_argument("--keep", action="append", default=[])
    a = ap.parse_args(argv)
    root = os.path.abspath(os.path.expanduser(a.root))
    if a.verb == "agent":
        return _sockets().verb_agent(root, a.key)
    if a.verb == "start":
        return verb_start(root, a.key, a.kind, a.wait, a.stream)
    if a.verb == "result":
        return verb_result(root, a.key, a.timeout, a.stream)
    if a.verb == "status":
        return verb_status(root, a.key)
    if a.verb == "logs":
        return verb_logs(root, a.key, a.offset, a.follow)
    if a.verb == "cancel":
        return verb_cancel(root, a.key)
    if a.verb == "invoke":
        return _sockets().verb_invoke(root, a.key)
    if a.verb == "build-env":
        return _host().verb_build_env(root, a.key)
    if a.verb == "check":
        return _host().verb_check(root)
    if a.verb == "down":
        return _host().verb_down(root)
    if a.verb == "gc":
        return _host().verb_gc(root, a.older_than_days, a.keep)
    print(f"runner: unknown verb {a.verb}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
