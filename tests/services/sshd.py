"""Two real OpenSSH servers on 127.0.0.1, started once per test session.

Each "host" is its own sshd on a free port, with its own config file and host key; one
throwaway client key logs in to both. Loopback hosts share one filesystem, so each gets its
own remote root directory: "stays on the cluster" and "once per host" can then be checked by
looking at those directories.

Without ``sshd`` (Debian package openssh-server) and ``rsync`` the tests that use these
fixtures skip, unless CLUSTERTUNE_REQUIRE_SERVICES=1 (CI), where they fail.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The path sshd gives a session before the user's shell start-up files (Debian's, for root).
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
HOW_TO_ENABLE = "install them with `bash scripts/ci/install_sshd.sh` (as root: openssh-server and rsync)"


def _require_or_skip(message: str) -> None:
    if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message}; CLUSTERTUNE_REQUIRE_SERVICES=1 requires the sshd service", pytrace=False)
    pytest.skip(f"{message}; {HOW_TO_ENABLE}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _account_locked(user: str) -> bool:
    # sshd with UsePAM no refuses accounts whose password field starts with "!".
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            name, pw, *_ = line.split(":")
            if name == user:
                return pw.startswith("!")
    except OSError:
        pass
    return False


@dataclass
class SshdHost:
    address: str
    port: int
    root: Path  # this host's remote root (clustertune's files there)
    host_key_pub: Path
    pid: int = 0


@dataclass
class SshdService:
    dir: Path
    user: str
    client_key: Path
    known_hosts: Path  # holds both hosts' keys
    hosts: list[SshdHost] = field(default_factory=list)

    def host_spec(self, i: int) -> str:
        return f"{self.user}@{self.hosts[i].address}:{self.hosts[i].port}"


def _start_one(base: Path, name: str, user: str, authorized: Path, use_pam: bool, log_level: str = "ERROR",
               wrapper: list[str] | None = None) -> SshdHost:
    d = base / name
    d.mkdir()
    key = d / "ssh_host_ed25519_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    port = _free_port()
    config = d / "sshd_config"
    home = d / "home"
    home.mkdir()
    config.write_text("\n".join([
        f"ListenAddress 127.0.0.1:{port}",
        f"HostKey {key}",
        f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes",
        "PermitRootLogin prohibit-password",
        # Keys live under /tmp, which is world-writable.
        "StrictModes no",
        f"UsePAM {'yes' if use_pam else 'no'}",
        # OpenSSH's default (10) drops parallel connections.
        "MaxStartups 100:30:200",
        "MaxSessions 100",
        f"LogLevel {log_level}",
        # Each host its own home, as two machines have: this machine's shell start-up files
        # (a pyenv or conda init there costs 0.1-0.2 s before every command) stay out of the
        # hosts' sessions. The hosts run this interpreter's Python (first on the path as
        # `python3`) with this machine's packages (site_packages_from), so they share its cache
        # too: the ops DeepSpeed compiles for those packages (30 s each) are built once.
        f"SetEnv HOME={home} XDG_CACHE_HOME={CACHE} PATH={Path(sys.base_prefix) / 'bin'}:{STD_PATH}",
        "",
    ]))
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    log = d / "sshd.log"
    subprocess.run([*(wrapper or []), sshd, "-f", str(config), "-E", str(log)], check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # sshd listens before its daemonised child writes the pid file: wait for both.
    pid_file = d / "sshd.pid"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            text = pid_file.read_text().split()
            if text:
                break
        except OSError:
            pass
        time.sleep(0.05)
    else:
        detail = log.read_text(errors="replace")[-2000:] if log.is_file() else "(no log)"
        raise RuntimeError(f"sshd on port {port} did not start (no pid file {pid_file}):\n{detail}")
    pid = int(text[0])
    root = d / "remote root"  # a space on purpose: every remote path must be quoted
    root.mkdir()
    return SshdHost("127.0.0.1", port, root, key.with_suffix(".pub"), pid)


@pytest.fixture(scope="session")
def sshd_service(tmp_path_factory: pytest.TempPathFactory):
    """Two sshd hosts on loopback, a client key and a known_hosts file holding their keys."""
    missing = [b for b in ("sshd", "ssh", "rsync", "ssh-keygen") if not (shutil.which(b) or Path(f"/usr/sbin/{b}").exists())]
    if missing:
        _require_or_skip(f"the SSH tests need {', '.join(missing)}")
    # Short base path: ssh ControlMaster sockets have a ~100 character limit.
    base = tmp_path_factory.mktemp("sshd")
    user = getpass.getuser()
    client_key = base / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(client_key)], check=True)
    authorized = base / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    authorized.chmod(0o600)
    use_pam = _account_locked(user)
    service = SshdService(base, user, client_key, base / "known_hosts")
    try:
        for name in ("host0", "host1"):
            service.hosts.append(_start_one(base, name, user, authorized, use_pam))
        lines = []
        for h in service.hosts:
            key_type, key_b64 = h.host_key_pub.read_text().split()[:2]
            lines.append(f"[{h.address}]:{h.port} {key_type} {key_b64}")
        service.known_hosts.write_text("\n".join(lines) + "\n")
        yield service
    finally:
        for h in service.hosts:
            try:
                os.kill(h.pid, signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


# A name only the jump host can resolve: a host under it is reachable through the jump host alone.
BEHIND_JUMP = "ct-behind-jump"


@dataclass
class JumpHost:
    host: SshdHost
    log: Path  # its sshd log (LogLevel DEBUG1: forwarding requests are recorded)
    behind: str  # the name of host1 that only this host resolves


def _can_private_mount() -> bool:
    probe = subprocess.run(["unshare", "--mount", "--", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.fixture(scope="session")
def jump_host(sshd_service: SshdService) -> Iterator[JumpHost]:
    """A third sshd, the jump host, started in its own mount namespace where /etc/hosts also
    maps :data:`BEHIND_JUMP` to 127.0.0.1. The client cannot resolve that name, so ssh to
    ``BEHIND_JUMP:<host1 port>`` works through this host and fails without it."""
    if not shutil.which("unshare") or not _can_private_mount():
        _require_or_skip("the jump host test needs `unshare --mount` (util-linux, as root) to give the jump "
                         "host its own /etc/hosts")
    base = sshd_service.dir
    hosts_file = base / "jump-etc-hosts"
    hosts_file.write_text(Path("/etc/hosts").read_text() + f"\n127.0.0.1 {BEHIND_JUMP}\n")
    # The bind mount lives in a private mount namespace: nothing outside it sees the name.
    wrapper = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts_file)]
    host = _start_one(base, "jump", sshd_service.user, base / "authorized_keys", _account_locked(sshd_service.user),
                      log_level="DEBUG1", wrapper=wrapper)
    yield JumpHost(host, base / "jump" / "sshd.log", BEHIND_JUMP)
    try:
        os.kill(host.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


@pytest.fixture
def ct_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated clustertune user config directory (clusters, client identity key)."""
    d = tmp_path / "ct-config"
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(d))
    return d


@pytest.fixture
def ssh_cluster(sshd_service: SshdService, ct_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A cluster "loop" of the two sshd hosts, in an isolated config; runs under tmp_path.

    Each test gets fresh remote roots (a subdirectory per test) so tests do not see each other's
    envs or runs."""
    from clustertune.remote.config import HostSpec, add_cluster

    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(tmp_path / "runs"))
    roots = []
    for h in sshd_service.hosts:
        r = h.root / tmp_path.name
        r.mkdir(parents=True, exist_ok=True)
        roots.append(r)
    hosts = [HostSpec(address=h.address, port=h.port, user=sshd_service.user, key=str(sshd_service.client_key),
                      root=str(r), known_hosts=str(sshd_service.known_hosts))
             for h, r in zip(sshd_service.hosts, roots)]
    cluster = add_cluster("loop", hosts)
    yield cluster
    from clustertune.remote.transport import close_all

    close_all()
    # Call agents idle for a long time before they exit: stop this test's now (the hosts share
    # this filesystem, so their pid files are right here).
    for r in roots:
        for pid_file in (r / "agents").glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
