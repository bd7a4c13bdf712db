"""A cluster of SSH hosts: the helper on each host, envs, folder sync, code snapshots, check,
down and gc. Remote functions and exec build on :meth:`Cluster.start`."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from clustertune.errors import ClusterError, EnvError
from clustertune.remote import runner as _runner_module
from clustertune.remote.config import ClusterSpec, HostSpec, get_cluster
from clustertune.remote.envs import Env, folder_files, tree_hash
from clustertune.remote.transport import Connection, Result, connection, control_dir, shell_join

EXIT_MISSING = _runner_module.EXIT_MISSING


def _helper_bundle() -> tuple[bytes, str]:
    """A tar of the helper and the cloudpickle it needs (pure Python), and its hash. Shipping
    cloudpickle with the helper means envs need not install it, and both ends always use the
    same version (cloudpickle's format is only guaranteed between equal versions)."""
    import io
    import tarfile

    import cloudpickle

    here = Path(_runner_module.__file__).parent
    files = {"_clustertune_runner.py": (here / "runner.py").read_bytes(),
             "_clustertune_runner_sockets.py": (here / "runner_sockets.py").read_bytes(),
             "_clustertune_runner_gpus.py": (here / "runner_gpus.py").read_bytes(),
             "_clustertune_runner_host.py": (here / "runner_host.py").read_bytes()}
    pkg = Path(cloudpickle.__file__).parent
    for f in sorted(pkg.glob("*.py")):
        files[f"cloudpickle/{f.name}"] = f.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return buf.getvalue(), digest.hexdigest()[:12]


_BUNDLE, RUNNER_HASH = _helper_bundle()


def _stderr_printer(prefix: str = "", to_stdout: bool = False) -> Callable[[bytes], None]:
    def show(line: bytes) -> None:
        out = sys.stdout if to_stdout else sys.stderr
        out.write(prefix + line.decode("utf-8", "replace"))
        out.flush()

    return show


def bytes_sent(stats: str) -> int:
    """``Total bytes sent`` from rsync's ``--stats`` (digits grouped with commas or dots)."""
    m = re.search(r"^Total bytes sent: ([\d,.]+)", stats, re.MULTILINE)
    return int(re.sub(r"[,.]", "", m.group(1))) if m else 0


class Cluster:
    """Handle on a configured cluster (``ct.cluster(NAME)``)."""

    def __init__(self, spec: ClusterSpec, accept_new_host_keys: bool = False):
        self.spec = spec
        self.accept_new_host_keys = accept_new_host_keys
        # (host index, what) pairs known to exist remotely: saves a round trip per call.
        self._present: set[tuple[int, str]] = set()

    @classmethod
    def named(cls, name: str, accept_new_host_keys: bool = False) -> Cluster:
        return cls(get_cluster(name), accept_new_host_keys)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def hosts(self) -> tuple[HostSpec, ...]:
        return self.spec.hosts

    def __repr__(self) -> str:
        return f"Cluster({self.name!r}, hosts={[h.label for h in self.hosts]})"

    def host_index(self, host: int | str | None) -> int:
        if host is None:
            return 0
        if isinstance(host, int) and 0 <= host < len(self.hosts):
            return host
        for i, h in enumerate(self.hosts):
            if host in (h.address, h.label):
                return i
        raise ClusterError(f"cluster {self.name!r} has no host {host!r} (hosts: "
                           f"{', '.join(f'{i}={h.label}' for i, h in enumerate(self.hosts))})")

    def conn(self, i: int) -> Connection:
        return connection(self.hosts[i], self.accept_new_host_keys, self.name)

    def bytes_received(self) -> int:
        return sum(self.conn(i).bytes_received for i in range(len(self.hosts)))

    # -- remote paths -------------------------------------------------------------------------

    def root(self, i: int) -> str:
        return self.hosts[i].root

    def runner_path(self, i: int) -> str:
        return posixpath.join(self.root(i), "lib", RUNNER_HASH, "_clustertune_runner.py")

    def env_dir(self, i: int, env_hash: str) -> str:
        return posixpath.join(self.root(i), "envs", env_hash)

    def remote_path(self, i: int, path: str) -> str:
        """A user path on the host: absolute as given, relative under the host's root."""
        return path if path.startswith("/") else posixpath.join(self.root(i), path)

    # -- the helper ---------------------------------------------------------------------------

    def ensure_runner(self, i: int) -> None:
        final = posixpath.dirname(self.runner_path(i))
        tmp = f"{final}.{secrets.token_hex(4)}.tmp"
        # Unpacked aside and renamed into place: a concurrent client never sees half a helper.
        cmd = shell_join(["mkdir", "-p", tmp], "&&", ["tar", "-x", "-C", tmp], "&&", "{", ["mv", "-T", tmp, final],
                         "||", ["rm", "-rf", tmp], ";", "}")
        self.conn(i).check_call(cmd, input=_BUNDLE, what="copying clustertune's helper")
        self._present.add((i, "runner"))

    def run_or_repair(self, i: int, cmd: str, *, repair: Callable[[], object] | None = None,
                      input: bytes | None = None, on_stderr: Callable[[bytes], None] | None = None,
                      timeout: float | None = None) -> Result:
        """Run ``cmd`` on host ``i``; when it exits :data:`EXIT_MISSING` (its own check found the
        helper, or an env, missing), ``repair`` (by default: copy the helper) and run it once more.

        Commands check what they need in the same round trip as the work, so a warm host costs
        one ssh call and a cold one two."""
        r = self.conn(i).run(cmd, input=input, on_stderr=on_stderr, timeout=timeout)
        if r.rc == EXIT_MISSING:
            if repair is not None:
                repair()
            else:
                self.ensure_runner(i)
            r = self.conn(i).run(cmd, input=input, on_stderr=on_stderr, timeout=timeout)
        return r

    def helper(self, i: int, verb: str, *args: str, input: bytes | None = None, python: str | None = None,
               on_stderr: Callable[[bytes], None] | None = None, timeout: float | None = None) -> Result:
        """Run a helper verb on host ``i`` (copying the helper there first if needed)."""
        py = python or self.hosts[i].python
        runner = self.runner_path(i)
        cmd = shell_join(["test", "-f", runner], "||", f"exit {EXIT_MISSING};", [py, runner, verb, self.root(i), *args])
        r = self.run_or_repair(i, cmd, input=input, on_stderr=on_stderr, timeout=timeout)
        if r.rc == 127:
            raise ClusterError(f"{self.hosts[i].label}: {py!r} was not found there ({r.err.strip()[-300:]}); "
                               "install Python 3 on the host or set the host's python in the cluster config")
        return r

    def helper_json(self, i: int, verb: str, *args: str, **kw: Any) -> dict[str, Any]:
        r = self.helper(i, verb, *args, **kw)
        try:
            return json.loads(r.text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise ClusterError(f"{self.hosts[i].label}: helper {verb} failed (exit {r.rc}): {r.err.strip()[-1500:]}") from None

    # -- envs ---------------------------------------------------------------------------------

    def env_python(self, i: int, env: Env) -> tuple[str, str]:
        """(env hash, the env's python path) on host i, without touching the host."""
        h = env.content_hash(self.hosts[i].python)
        return h, posixpath.join(self.env_dir(i, h), "bin", "python")

    def env_ready_test(self, i: int, env: Env) -> list[str]:
        h, _ = self.env_python(i, env)
        return ["test", "-f", posixpath.join(self.env_dir(i, h), ".ready")]

    def ensure_env(self, i: int, env: Env, stream: bool = True) -> str:
        """Create the env on host i unless an identical one exists; returns its hash."""
        h, _ = self.env_python(i, env)
        if (i, f"env:{h}") in self._present:
            return h
        r = self.conn(i).run(shell_join(self.env_ready_test(i, env)))
        if r.rc != 0:
            spec = env.spec(self.hosts[i].python)
            spec["requirements"] = [self._upload_package(i, Path(req)) if Path(req).expanduser().resolve() in env.local_packages() else req
                                    for req in env.requirements]
            lines: list[bytes] = []

            def collect(line: bytes) -> None:
                lines.append(line)
                if stream:
                    _stderr_printer(f"[{self.hosts[i].label} env {h[:8]}] ")(line)

            r = self.helper(i, "build-env", h, input=json.dumps(spec).encode() + b"\n", on_stderr=collect)
            if r.rc != 0:
                tail = b"".join(lines[-25:]).decode("utf-8", "replace").strip()
                raise EnvError(f"{self.hosts[i].label}: building env {h} failed (exit {r.rc}); "
                               f"pip said:\n{tail}\nfix the requirement and call again")
        self._present.add((i, f"env:{h}"))
        return h

    def _upload_package(self, i: int, local: Path) -> str:
        local = local.expanduser().resolve()
        dest = posixpath.join(self.root(i), "pkgs", tree_hash(local))
        if local.is_file():  # a wheel or sdist: pip needs its own file name
            self.snapshot_to(i, local.parent, dest, files=[local.name])
            dest = posixpath.join(dest, local.name)
        else:
            self.snapshot_to(i, local, dest)
        return dest if dest.startswith("/") else "./" + dest

    # -- the persistent agent ---------------------------------------------------------------

    def agent_socket(self, i: int, env: Env) -> str:
        """A local unix socket forwarded over host i's master connection to the env's agent
        (started if needed): a warm call then costs one request on an open connection."""
        h, py = self.env_python(i, env)
        key = (i, f"agent:{h}")
        local = str(control_dir() / f"fwd-{hashlib.sha256(f'{self.hosts[i]}|{h}'.encode()).hexdigest()[:16]}.sock")
        if key in self._present and os.path.exists(local):
            return local
        self.ensure_env(i, env)
        # Remote unix socket paths are short-limited too: a private folder in /tmp on the host.
        tag = hashlib.sha256(f"{self.root(i)}|{h}".encode()).hexdigest()[:16]
        remote = f"/tmp/ct-agents-{self.hosts[i].user or 'u'}/{tag}.sock"
        info = self.helper_json(i, "agent", remote, python=py)
        if info.get("agent") not in ("started", "running"):
            raise ClusterError(f"{self.hosts[i].label}: the call agent did not start ({info})")
        conn = self.conn(i)
        if os.path.exists(local):
            os.unlink(local)
        fwd = subprocess.run(["ssh", *conn.ssh_options(), "-O", "forward", "-L", f"{local}:{remote}", "--",
                              self.hosts[i].address], capture_output=True, text=True, timeout=30)
        if fwd.returncode != 0:
            raise ClusterError(f"{self.hosts[i].label}: could not forward the agent socket: {fwd.stderr.strip()}")
        self._present.add(key)
        return local

    def forget_agent(self, i: int, env: Env) -> None:
        h, _ = self.env_python(i, env)
        self._present.discard((i, f"agent:{h}"))

    # -- folders ------------------------------------------------------------------------------

    def sync(self, local: Path, remote: str | None = None, hosts: Sequence[int] | None = None) -> list[str]:
        """Mirror ``local`` to every host (``.gitignore`` respected); returns the remote paths."""
        local = Path(local).expanduser().resolve()
        if not local.is_dir():
            raise ClusterError(f"{local}: not a folder; `clustertune sync {self.name} LOCAL_FOLDER [REMOTE]` "
                               "mirrors a folder")
        remote = remote or local.name
        if "\0" in remote or "\n" in remote:
            raise ClusterError(f"remote path {remote!r} is not a usable path")

        def one(i: int) -> str:
            dest = self.remote_path(i, remote)
            self.conn(i).check_call(["mkdir", "-p", dest], what=f"creating {dest}")
            self.conn(i).rsync(["-a", "--delete", "--filter=:- .gitignore", "--exclude=.git/", "--exclude=__pycache__/",
                                f"{local}/", self.conn(i).remote(dest.rstrip("/") + "/")])
            return dest

        targets = list(hosts) if hosts is not None else list(range(len(self.hosts)))
        with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
            return list(pool.map(one, targets))

    def snapshot_to(self, i: int, local: Path, dest: str, files: list[str] | None = None) -> int:
        """Copy the files of ``local`` to ``dest`` on host i, all or nothing (renamed into place),
        unless it is there already; the bytes rsync sent (0 when nothing was)."""
        if (i, f"dir:{dest}") in self._present:
            return 0
        conn = self.conn(i)
        if conn.run(["test", "-d", dest]).rc == 0:
            self._present.add((i, f"dir:{dest}"))
            return 0
        files = files if files is not None else folder_files(local)
        partial = dest.rstrip("/") + ".partial"
        conn.check_call(["mkdir", "-p", partial], what=f"creating {partial}")
        with tempfile.NamedTemporaryFile("wb", suffix=".files") as fh:
            fh.write(b"\0".join(f.encode("utf-8", "surrogateescape") for f in files))
            fh.flush()
            r = conn.rsync(["-a", "--stats", "--from0", f"--files-from={fh.name}", f"{local}/",
                            conn.remote(partial + "/")])
        conn.check_call(shell_join(["rm", "-rf", dest], "&&", ["mv", partial, dest]), what="placing the snapshot")
        self._present.add((i, f"dir:{dest}"))
        return bytes_sent(r.text)

    def snapshot(self, i: int, local: Path) -> str:
        """A content-addressed snapshot of ``local`` on host i: later local edits do not reach
        runs already started from it."""
        local = Path(local).expanduser().resolve()
        files = folder_files(local)
        dest = posixpath.join(self.root(i), "code", tree_hash(local, files))
        self.snapshot_to(i, local, dest, files)
        return dest

    # -- whole-cluster verbs ------------------------------------------------------------------

    def each(self, fn: Callable[[int], Any], hosts: list[int] | None = None) -> list[Any]:
        """``fn(i)`` for every host ``i`` (or those of ``hosts``) at once, in order: one round
        trip's wait for all of them, not one per host."""
        hosts = list(range(len(self.hosts))) if hosts is None else hosts
        with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
            return list(pool.map(fn, hosts))

    def check(self, env: Env | None = None) -> list[dict[str, Any]]:
        """Per host: reachable, Python version, GPUs and memory, free disk, envs present."""

        def one(i: int) -> dict[str, Any]:
            row: dict[str, Any] = {"host": self.hosts[i].label}
            try:
                row.update(self.helper_json(i, "check"))
                row["ok"] = True
                if env is not None:
                    row["env_present"] = env.content_hash(self.hosts[i].python) in row.get("envs", [])
            except ClusterError as exc:
                row.update(ok=False, error=str(exc))
            return row

        return self.each(one)

    def down(self) -> list[dict[str, Any]]:
        """Stop every run and object clustertune started on the hosts."""
        out = self.each(lambda i: {"host": self.hosts[i].label, **self.helper_json(i, "down")})
        for i in range(len(self.hosts)):
            self.conn(i).close()
        return out

    def gc(self, older_than_days: float = 7.0) -> list[dict[str, Any]]:
        """Remove finished runs, code snapshots and envs older than the limit."""
        return self.each(lambda i: {"host": self.hosts[i].label,
                                     **self.helper_json(i, "gc", "--older-than-days", str(older_than_days))})


def cluster(name: str, accept_new_host_keys: bool = False) -> Cluster:
    """``ct.cluster(NAME)``: a configured cluster (``clustertune cluster add``)."""
    return Cluster.named(name, accept_new_host_keys)
