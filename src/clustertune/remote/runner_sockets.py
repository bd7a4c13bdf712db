"""The socket half of the host helper: long-lived objects and the per-env call agent.

Shipped beside ``_clustertune_runner.py`` (as ``_clustertune_runner_sockets.py``); standard
library only. Frames on every socket are an 8-byte big-endian length, then the bytes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import traceback

# The host helper that loaded this module (its state files, signing, forking): set by that
# helper when it loads this one, so the dependency runs one way, helper -> sockets, on a host
# (where both are loose scripts) and in the client's package alike.
base = None


def _child_serve(root: str, rdir: str, header: dict, payload: bytes) -> int:
    """A long-lived object: construct it once, then answer method calls on a unix socket."""
    import pickle

    secret = header["secret"]
    sock_path = os.path.join(rdir, "sock")
    try:
        cls, args, kwargs = pickle.loads(payload)
        cls = base._find_function(header.get("function", {}), cls)
        obj = cls(*base._resolve(args, root, header.get("refs", {})), **base._resolve(kwargs, root, header.get("refs", {})))
    except BaseException:  # noqa: BLE001
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        base._set_state(rdir, "FAILED", reason="the constructor raised", traceback=tb)
        return 1
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    _in_dir(rdir, lambda: srv.bind("sock"))
    os.chmod(sock_path, 0o600)
    srv.listen(16)
    base._set_state(rdir, "RUNNING", serving=True)
    print("object ready", flush=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            request = _recv_frame(conn)
            name, args, kwargs = pickle.loads(request)
            if name == "__stop__":
                data = base._outcome_bytes("ok", None)
                conn.sendall(_frame(data) + base._sign(secret, data).encode())
                break
            try:
                value = getattr(obj, name)(*args, **kwargs)
                data = base._outcome_bytes("ok", value)
            except BaseException as exc:  # noqa: BLE001
                tb = traceback.format_exc()
                sys.stderr.write(tb)
                data = base._outcome_bytes("err", exc, tb)
            conn.sendall(_frame(data) + base._sign(secret, data).encode())
    srv.close()
    os.unlink(sock_path)
    base._set_state(rdir, "COMPLETED")
    return 0


def _in_dir(path: str, fn) -> None:
    # Unix socket paths are limited to ~107 bytes; roots can be deeper: use a relative name.
    old = os.getcwd()
    os.chdir(path)
    try:
        fn()
    finally:
        os.chdir(old)


def _frame(data: bytes) -> bytes:
    return struct.pack("!Q", len(data)) + data


def _recv_exact(conn, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("object process closed the connection")
        buf += chunk
    return buf


def _recv_frame(conn) -> bytes:
    (n,) = struct.unpack("!Q", _recv_exact(conn, 8))
    return _recv_exact(conn, n)


# -- verbs ------------------------------------------------------------------------------------------


def _agent_socket_ok(sock_path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _in_dir(os.path.dirname(sock_path), lambda: probe.connect(os.path.basename(sock_path)))
        probe.sendall(_frame(b"ping"))
        return _recv_frame(probe) == b"pong"
    except OSError:
        return False
    finally:
        probe.close()


def _agent_serve_one(root: str, conn) -> None:
    """One call through the agent: request frame in; "accepted" frame; result frame out."""
    request = _recv_frame(conn)
    if request == b"ping":
        conn.sendall(_frame(b"pong"))
        return
    head_line, _, payload = request.partition(b"\n")
    header = json.loads(head_line)
    try:
        rdir, pid = base._fork_run(root, header["key"], "call", header, payload)
    except SystemExit as exc:  # refused before it started (no free GPU, a reused key): say why
        conn.sendall(_frame(b"refused\n" + str(exc.code).encode()))
        return
    conn.sendall(_frame(b"accepted"))
    os.waitpid(pid, 0)
    st = base._status(rdir)
    data, sig = b"", ""
    if os.path.exists(os.path.join(rdir, "result.pkl")):
        with open(os.path.join(rdir, "result.pkl"), "rb") as fh:
            data = fh.read()
        with open(os.path.join(rdir, "result.sig")) as fh:
            sig = fh.read().strip()
    head = {"state": st.get("state"), "reason": st.get("reason"), "sig": sig}
    conn.sendall(_frame(json.dumps(head).encode() + b"\n" + data))


def verb_agent(root: str, sock_path: str, idle_seconds: float = 1800.0) -> int:
    """A persistent helper for one env: calls arrive on a unix socket (forwarded over the
    client's ssh master connection), so a warm call starts no ssh session and no Python.
    Each call still runs as its own run, forked into its own session, exactly as `start`."""
    sock_dir = os.path.dirname(sock_path)
    os.makedirs(sock_dir, mode=0o700, exist_ok=True)
    st = os.stat(sock_dir)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        print(f"agent socket directory {sock_dir} is not private to this user", file=sys.stderr)
        return 5
    if _agent_socket_ok(sock_path):
        print(json.dumps({"agent": "running"}))
        return 0
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid != 0:
        os.close(ready_w)
        ok = os.read(ready_r, 16)
        print(json.dumps({"agent": "started" if ok == b"ok" else "failed", "pid": pid}))
        return 0 if ok == b"ok" else 6
    os.close(ready_r)
    os.setsid()
    log_fd = os.open(os.path.join(root, "agent.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    import cloudpickle  # noqa: F401 - loaded once here, inherited by every forked call

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = os.path.basename(sock_path)
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    _in_dir(sock_dir, lambda: srv.bind(name))
    os.chmod(sock_path, 0o600)
    srv.listen(64)
    srv.settimeout(idle_seconds)
    os.makedirs(os.path.join(root, "agents"), exist_ok=True)
    base._write_atomic(os.path.join(root, "agents", name + ".pid"), str(os.getpid()).encode())
    os.write(ready_w, b"ok")
    os.close(ready_w)
    while True:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            break
        if os.fork() == 0:
            srv.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _agent_serve_one(root, conn)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                os._exit(0)
        conn.close()
    os.unlink(sock_path)
    return 0


def verb_invoke(root: str, key: str) -> int:
    """One method call on a live object: stdin is the pickled (name, args, kwargs)."""
    rdir = base._run_dir(root, key)
    sock_path = os.path.join(rdir, "sock")
    request = sys.stdin.buffer.read()
    if base._status(rdir).get("state") != "RUNNING" or not os.path.exists(sock_path):
        print(f"object {key} is not running ({base._status(rdir).get('state')})", file=sys.stderr)
        return 4
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _in_dir(rdir, lambda: conn.connect("sock"))
    with conn:
        conn.sendall(_frame(request))
        data = _recv_frame(conn)
        sig = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            sig += chunk
    sys.stdout.buffer.write(json.dumps({"state": "COMPLETED", "sig": sig.decode()}).encode() + b"\n" + data)
    return 0
