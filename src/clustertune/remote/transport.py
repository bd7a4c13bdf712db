"""Plain OpenSSH and rsync to one host, over one multiplexed connection per host.

Every remote command is an argument list; it is turned into the one string a remote shell
parses with :func:`shlex.join`, so no argument is ever split or interpreted there. Host keys
are verified (``StrictHostKeyChecking=yes``) unless the caller asks to accept a new key once.
Bytes moved over each connection are counted, so callers can show what stayed remote.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clustertune.errors import ClusterError, HostKeyError
from clustertune.remote.config import HostSpec


def control_dir() -> Path:
    # ControlPath sockets have a ~100 byte limit: keep the directory short, private, per user.
    d = Path(os.environ.get("CLUSTERTUNE_SSH_CONTROL_DIR") or f"/tmp/ct-ssh-{os.getuid()}")
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def _ssh_option_value(path: str) -> str:
    # ssh's config parser splits option values on spaces (UserKnownHostsFile takes a list).
    return f'"{path}"' if any(c.isspace() for c in path) else path


@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class Connection:
    """ssh/rsync to one host. ``accept_new_host_key`` trusts an unknown host key once (the
    user asked for it explicitly); a changed key is always refused."""

    def __init__(self, host: HostSpec, accept_new_host_key: bool = False):
        self.host = host
        self.accept_new_host_key = accept_new_host_key
        self.bytes_sent = 0
        self.bytes_received = 0
        self._lock = threading.Lock()

    # -- argv ---------------------------------------------------------------------------------

    def ssh_options(self) -> list[str]:
        opts = self._connect_options()
        # The socket name covers every option (known_hosts, key, jump...), not just host/port/user
        # as ssh's %C does: a master opened under other settings must not be reused, or it would
        # skip the host key check these settings ask for.
        digest = hashlib.sha256("\0".join([*opts, self.host.address]).encode()).hexdigest()[:24]
        return ["-o", "ControlMaster=auto", "-o", f"ControlPath={control_dir()}/{digest}",
                "-o", "ControlPersist=600", *opts]

    def _connect_options(self) -> list[str]:
        h = self.host
        opts = [
            "-o", "BatchMode=yes",
            "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new_host_key else 'yes'}",
            "-o", "ConnectTimeout=15",
            "-o", "ServerAliveInterval=15",
        ]
        if h.port:
            opts += ["-p", str(h.port)]
        if h.key:
            opts += ["-i", str(Path(h.key).expanduser()), "-o", "IdentitiesOnly=yes"]
        if h.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={_ssh_option_value(str(Path(h.known_hosts).expanduser()))}"]
        if h.jump:
            opts += ["-J", h.jump]
        if h.user:
            opts += ["-l", h.user]
        return opts

    def ssh_argv(self, remote_command: str | None = None) -> list[str]:
        argv = ["ssh", *self.ssh_options(), "--", self.host.address]
        if remote_command is not None:
            argv.append(remote_command)
        return argv

    # -- running ------------------------------------------------------------------------------

    def run(self, argv: Sequence[str] | str, input: bytes | None = None, timeout: float | None = None,
            on_stderr: Callable[[bytes], None] | None = None, check_ssh: bool = True) -> Result:
        """Run ``argv`` on the host (a list, quoted here; or a shell string built with
        :func:`shell_join` and friends). ``on_stderr`` receives the remote stderr as it comes."""
        command = argv if isinstance(argv, str) else shlex.join(argv)
        proc = subprocess.Popen(self.ssh_argv(command), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err_chunks: list[bytes] = []

        def pump_stderr() -> None:
            assert proc.stderr is not None
            for line in iter(proc.stderr.readline, b""):
                err_chunks.append(line)
                if on_stderr is not None:
                    on_stderr(line)

        def feed() -> None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(input or b"")
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass  # the remote side exited early; its answer says why

        threads = [threading.Thread(target=pump_stderr, daemon=True)]
        if input is not None:
            threads.append(threading.Thread(target=feed, daemon=True))
        for t in threads:
            t.start()
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait()
        for t in threads:
            t.join()
        if timer is not None:
            timer.cancel()
            if proc.returncode == -9:
                raise ClusterError(f"{self.host.label}: no answer within {timeout:.0f} s to {command[:80]!r}")
        err = b"".join(err_chunks)
        with self._lock:
            self.bytes_sent += len(input or b"")
            self.bytes_received += len(out) + len(err)
        result = Result(proc.returncode, out, err)
        if check_ssh and result.rc == 255:
            raise_ssh_failure(self.host, result.err)
        return result

    def check_call(self, argv: Sequence[str] | str, input: bytes | None = None, timeout: float | None = None,
                   what: str = "command") -> Result:
        r = self.run(argv, input=input, timeout=timeout)
        if r.rc != 0:
            raise ClusterError(f"{self.host.label}: {what} failed (exit {r.rc}): {r.err.strip()[-2000:]}")
        return r

    def rsync(self, args: Sequence[str], timeout: float | None = None) -> Result:
        """rsync with this connection as its remote shell. Remote paths in ``args`` are written
        ``:PATH`` (``remote(path)``); ``--protect-args`` keeps the remote shell off them."""
        ssh_cmd = shlex.join(["ssh", *self.ssh_options()])
        argv = ["rsync", "--protect-args", "-e", ssh_cmd, *args]
        proc = subprocess.run(argv, capture_output=True, timeout=timeout)
        if proc.returncode == 255 or (proc.returncode != 0 and b"ssh:" in proc.stderr):
            raise_ssh_failure(self.host, proc.stderr.decode("utf-8", "replace"))
        if proc.returncode != 0:
            raise ClusterError(f"{self.host.label}: rsync failed (exit {proc.returncode}): "
                               f"{proc.stderr.decode('utf-8', 'replace').strip()[-2000:]}")
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def remote(self, path: str) -> str:
        """``address:path`` for rsync (user and port travel in the ssh options)."""
        return f"{self.host.address}:{path}"

    def close(self) -> None:
        """Stop this host's multiplexed master connection (if any)."""
        subprocess.run(["ssh", *self.ssh_options(), "-O", "exit", "--", self.host.address],
                       capture_output=True, timeout=15)


def raise_ssh_failure(host: HostSpec, stderr: str) -> None:
    """Turn ssh's own failure (exit 255) into an error that says what to do."""
    text = stderr.strip()
    kh = host.known_hosts or "~/.ssh/known_hosts"
    keyscan = shlex.join(["ssh-keyscan", *(["-p", str(host.port)] if host.port else []), host.address])
    target = f"[{host.address}]:{host.port}" if host.port else host.address
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key for" in text and "has changed" in text:
        raise HostKeyError(
            f"{host.label}: the host key CHANGED since it was recorded in {kh}. This can be an attack. "
            f"If the host was really reinstalled, remove the old key with "
            f"`ssh-keygen -R {shlex.quote(target)} -f {kh}` and accept the new one.")
    if "Host key verification failed" in text or "No ED25519 host key is known" in text or "host key is not known" in text.lower():
        raise HostKeyError(
            f"{host.label}: its host key is not in {kh}, so the connection was refused. Check the key "
            f"and add it (`{keyscan} >> {kh}`), or accept it once with "
            f"`clustertune cluster check NAME --accept-new-host-keys`.")
    if "Permission denied" in text:
        raise ClusterError(f"{host.label}: authentication failed ({text.splitlines()[-1]}); check the user "
                           "and the identity file (`clustertune cluster add NAME HOST --user U --key FILE`)")
    if any(s in text for s in ("Connection refused", "timed out", "No route to host", "Could not resolve",
                               "Name or service not known", "Connection closed", "Network is unreachable")):
        raise ClusterError(f"{host.label}: unreachable ({text.splitlines()[-1] if text else 'no answer'}); "
                           "check the address and port and that sshd runs there")
    raise ClusterError(f"{host.label}: ssh failed: {text[-2000:] or 'exit 255'}")


_CONNECTIONS: dict[tuple, Connection] = {}
_CONN_LOCK = threading.Lock()


def connection(host: HostSpec, accept_new_host_key: bool = False) -> Connection:
    """The process-wide Connection for ``host`` (its byte counters accumulate)."""
    key = (host, accept_new_host_key)
    with _CONN_LOCK:
        conn = _CONNECTIONS.get(key)
        if conn is None:
            conn = _CONNECTIONS[key] = Connection(host, accept_new_host_key)
        return conn


def close_all() -> None:
    with _CONN_LOCK:
        conns = list(_CONNECTIONS.values())
        _CONNECTIONS.clear()
    for c in conns:
        try:
            c.close()
        except (OSError, subprocess.TimeoutExpired):
            print(f"clustertune: could not close ssh master of {c.host.label}", file=sys.stderr)


def shell_join(*parts: Sequence[str] | str) -> str:
    """A remote shell line: lists are quoted word by word, strings are shell syntax we wrote
    (operators such as ``&&``), never user data."""
    out = []
    for p in parts:
        out.append(p if isinstance(p, str) else shlex.join(p))
    return " ".join(out)
