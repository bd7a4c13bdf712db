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
import stat
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
    # Anyone who can write here could put a socket of theirs where ssh looks for ours.
    st = d.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ClusterError(
            f"ssh control directory {d} is not a private directory of this user (owner uid {st.st_uid}, "
            f"mode {stat.S_IMODE(st.st_mode):o}); remove it, or set CLUSTERTUNE_SSH_CONTROL_DIR to a "
            "directory only you can use (mode 700)"
        )
    return d


def _ssh_option_value(path: str) -> str:
    # ssh's option parser splits values on spaces (UserKnownHostsFile takes a list) and reads
    # quotes: one double-quoted word, its backslashes and double quotes escaped, stays whole.
    # It then expands %-tokens (%h, %d...) in identity and known_hosts paths: a literal % is %%.
    escaped = path.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def ssh_env() -> dict[str, str]:
    """The environment for ssh and rsync: ssh runs a ProxyCommand with ``$SHELL -c``, and the
    quoting in :func:`proxy_command` is POSIX shell quoting, whatever the user's login shell."""
    return {**os.environ, "SHELL": "/bin/sh"}


def proxy_command(argv: Sequence[str]) -> str:
    """A ``ProxyCommand`` value running ``argv``: ssh hands it to the user's shell after
    expanding %-tokens, so every word is shell-quoted and its % doubled; only the ``%h:%p``
    that ssh must fill in (the host and port being reached) stays a token."""
    return " ".join(a if a == "%h:%p" else shlex.quote(a).replace("%", "%%") for a in argv)


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
    user asked for it explicitly); a changed key is always refused. ``cluster``: the name of the
    cluster the host belongs to, for the commands its failures suggest."""

    def __init__(self, host: HostSpec, accept_new_host_key: bool = False, cluster: str | None = None):
        self.host = host
        self.accept_new_host_key = accept_new_host_key
        self.cluster = cluster
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

    def _trust_options(self) -> list[str]:
        """Authentication, host key checking and timeouts: the same for the host and for each
        of its jump hosts (the cluster's key and known_hosts reach every hop)."""
        h = self.host
        opts = [
            "-o", "BatchMode=yes",
            "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new_host_key else 'yes'}",
            "-o", "ConnectTimeout=15",
            "-o", "ServerAliveInterval=15",
        ]
        if h.key:
            # Not `-i`: ssh drops an -i path it cannot stat before expanding its %-tokens, so a path
            # holding a literal % could not be given that way at all.
            opts += ["-o", f"IdentityFile={_ssh_option_value(str(Path(h.key).expanduser()))}",
                     "-o", "IdentitiesOnly=yes"]
        if h.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={_ssh_option_value(str(Path(h.known_hosts).expanduser()))}"]
        return opts

    def _connect_options(self) -> list[str]:
        h = self.host
        opts = self._trust_options()
        if h.port:
            opts += ["-p", str(h.port)]
        if h.jump:
            opts += ["-o", f"ProxyCommand={self._proxy_through(h.jump_hops())}"]
        if h.user:
            opts += ["-l", h.user]
        return opts

    def _proxy_through(self, hops: list[HostSpec]) -> str:
        return proxy_command(self._proxy_argv(hops))

    def _proxy_argv(self, hops: list[HostSpec]) -> list[str]:
        """The ProxyCommand reaching the host through ``hops`` (first hop first): ssh to the
        last hop with this host's trust options, forwarding stdio to the host (``-W``); earlier
        hops nest as that ssh's own ProxyCommand. ``ssh -J`` would not do: it gives the hops
        none of the command line's options (identity file, known_hosts, BatchMode), only what
        ~/.ssh/config says about them. A ProxyCommand is a plain option, so ssh, rsync's ssh
        and the multiplexed master all take the same path, and ~/.ssh/config still applies."""
        *before, last = hops
        argv = ["ssh", *self._trust_options()]
        if last.port:
            argv += ["-p", str(last.port)]
        if last.user:
            argv += ["-l", last.user]
        if before:
            argv += ["-o", f"ProxyCommand={self._proxy_through(before)}"]
        argv += ["-W", "%h:%p", "--", last.address]
        return argv

    def _jump_failure(self) -> str:
        """What the jump hosts say when the connection through them failed. A ControlPersist
        master sends its ProxyCommand's stderr to /dev/null, so the hop's own words (unknown
        host key, authentication) are lost: ask the hops once more, in the foreground."""
        h = self.host
        argv = [f"{h.address}:{h.port or 22}" if a == "%h:%p" else a for a in self._proxy_argv(h.jump_hops())]
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=ssh_env())
        except subprocess.TimeoutExpired:
            return f"the jump host {h.jump} did not answer within 30 s"
        return proc.stderr.decode("utf-8", "replace") if proc.returncode == 255 else ""

    def _ssh_failure(self, stderr: str) -> None:
        if self.host.jump:
            stderr = f"{stderr}\n{self._jump_failure()}"  # last: its last line is the one shown
        raise_ssh_failure(self.host, stderr, self.cluster)

    def plain_ssh(self) -> list[str]:
        """``ssh`` with this host's options but no multiplexing: a command a user can run."""
        return ["ssh", *self._connect_options()]

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
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ssh_env())
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
            self._ssh_failure(result.err)
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
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=ssh_env())
        if proc.returncode == 255 or (proc.returncode != 0 and b"ssh:" in proc.stderr):
            self._ssh_failure(proc.stderr.decode("utf-8", "replace"))
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
                       capture_output=True, timeout=15, env=ssh_env())


def raise_ssh_failure(host: HostSpec, stderr: str, cluster: str | None = None) -> None:
    """Turn ssh's own failure (exit 255) into an error that says what to do (``cluster``: the
    name of the host's cluster, which the commands to run name)."""
    text = stderr.strip()
    # Unknown: a placeholder the message explains, never a name that is not the cluster's.
    name = shlex.quote(cluster) if cluster else "CLUSTER"
    of = "" if cluster else f" (CLUSTER: the name of the cluster holding {host.label})"
    kh = host.known_hosts or "~/.ssh/known_hosts"
    # Through jump hosts, the hop whose key ssh complains about is the one to scan and accept.
    keyed = host
    for hop in host.jump_hops():
        if f"for {_known_hosts_name(hop)} " in text:  # "...is known for NAME and", "Host key for NAME has"
            keyed = hop
    keyscan = shlex.join(["ssh-keyscan", *(["-p", str(keyed.port)] if keyed.port else []), keyed.address])
    target = _known_hosts_name(keyed)
    which = "" if keyed is host else f" (jump host {keyed.label})"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key for" in text and "has changed" in text:
        raise HostKeyError(
            f"{host.label}: the host key{which} CHANGED since it was recorded in {kh}. This can be an attack. "
            f"If the host was really reinstalled, remove the old key with "
            f"`ssh-keygen -R {shlex.quote(target)} -f {kh}` and accept the new one.")
    if "Host key verification failed" in text or "No ED25519 host key is known" in text or "host key is not known" in text.lower():
        raise HostKeyError(
            f"{host.label}: the host key{which} is not in {kh}, so the connection was refused. Check the key "
            f"and add it (`{keyscan} >> {kh}`), or accept it once with "
            f"`clustertune cluster check {name} --accept-new-host-keys`{of}.")
    if "Permission denied" in text:
        raise ClusterError(f"{host.label}: authentication failed ({text.splitlines()[-1]}); check the user "
                           f"and the identity file (`clustertune cluster add {name} HOST... --user U --key FILE` "
                           f"replaces the cluster's settings){of}")
    unreachable = ("Connection refused", "timed out", "No route to host", "Could not resolve",
                   "Name or service not known", "Connection closed", "Network is unreachable")
    if any(s in text for s in unreachable):
        via = f" through jump host {host.jump}" if host.jump else ""
        # The most specific line: through a jump host the last one is only "stdio forwarding failed".
        lines = text.splitlines() or ["no answer"]
        specific = [s for s in unreachable if s != "Connection closed"]
        why = next((line for line in reversed(lines) if any(s in line for s in specific)), lines[-1])
        raise ClusterError(f"{host.label}: unreachable{via} ({why.strip()}); "
                           "check the address and port and that sshd runs there")
    raise ClusterError(f"{host.label}: ssh failed: {text[-2000:] or 'exit 255'}")


def _known_hosts_name(host: HostSpec) -> str:
    """How ssh names ``host`` in known_hosts and in its messages."""
    return f"[{host.address}]:{host.port}" if host.port and host.port != 22 else host.address


_CONNECTIONS: dict[tuple, Connection] = {}
_CONN_LOCK = threading.Lock()


def connection(host: HostSpec, accept_new_host_key: bool = False, cluster: str | None = None) -> Connection:
    """The process-wide Connection for ``host`` of ``cluster`` (its byte counters accumulate)."""
    key = (host, accept_new_host_key, cluster)
    with _CONN_LOCK:
        conn = _CONNECTIONS.get(key)
        if conn is None:
            conn = _CONNECTIONS[key] = Connection(host, accept_new_host_key, cluster)
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
