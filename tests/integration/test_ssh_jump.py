"""A host reachable only through a jump host, over real sshd: the jump host resolves a name
the client cannot, so every connection that works went through it. The cluster's own key and
known_hosts (in a folder with a hostile name) serve both hops, for ssh, rsync, the multiplexed
master and its forwarded agent socket alike."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import ClusterError, HostKeyError
from clustertune.remote.config import HostSpec, add_cluster, get_cluster
from clustertune.remote.envs import Env
from clustertune.remote.transport import Connection, close_all
from tests.helpers import cli

# Quotes, spaces, a command separator, a command substitution and ssh's %-tokens: the key and
# known_hosts paths pass through ssh's option parser, its token expansion and (inside the
# ProxyCommand) a shell. Relative markers: they would appear in the test's working directory.
WEIRD = "we ird 'q\" ; touch ct-pwned-a $(touch ct-pwned-b) %h %%"
MARKERS = ("ct-pwned-a", "ct-pwned-b")


def _known_hosts_line(name: str, pub: Path) -> str:
    key_type, key_b64 = pub.read_text().split()[:2]
    return f"{name} {key_type} {key_b64}\n"


def _behind(sshd_service, jump_host, tmp_path: Path, trust_jump: bool = True, **fields) -> HostSpec:
    """host1 under a name only the jump host resolves, with a key and known_hosts of its own."""
    weird = tmp_path / WEIRD
    weird.mkdir(exist_ok=True)
    key = weird / "client key"
    shutil.copy(sshd_service.client_key, key)
    key.chmod(0o600)
    h1 = sshd_service.hosts[1]
    kh = weird / "known hosts"
    lines = _known_hosts_line(f"[{jump_host.behind}]:{h1.port}", h1.host_key_pub)
    if trust_jump:
        lines += _known_hosts_line(f"[127.0.0.1]:{jump_host.host.port}", jump_host.host.host_key_pub)
    kh.write_text(lines)
    root = h1.root / tmp_path.name
    root.mkdir(parents=True, exist_ok=True)
    spec = dict(address=jump_host.behind, port=h1.port, user=sshd_service.user, key=str(key), known_hosts=str(kh),
                jump=f"{sshd_service.user}@127.0.0.1:{jump_host.host.port}", root=str(root))
    spec.update(fields)
    return HostSpec(**spec)


def _forwards(jump_host) -> int:
    """Forwarding requests the jump host has served (sshd logs each one at DEBUG1)."""
    text = jump_host.log.read_text(errors="replace")
    return sum(1 for line in text.splitlines()
               if "server_request_direct_tcpip" in line and f"target {jump_host.behind} " in line)


def _double(x: int) -> int:
    return 2 * x


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # where an unquoted `touch` in a ProxyCommand would land
    yield tmp_path
    close_all()
    assert not [m for m in MARKERS if (tmp_path / m).exists() or (Path.home() / m).exists()]


def test_host_behind_a_jump_host_through_ssh_rsync_and_the_master(sshd_service, jump_host, ct_config, in_tmp,
                                                                  monkeypatch):
    # ssh runs a ProxyCommand with $SHELL: the quoting must not depend on the user's shell.
    monkeypatch.setenv("SHELL", "/usr/sbin/nologin")
    spec = _behind(sshd_service, jump_host, in_tmp)
    # Without the jump the name does not even resolve here: whatever works below went through it.
    with pytest.raises(ClusterError, match="unreachable"):
        Connection(dataclasses.replace(spec, jump=None)).run(["true"])

    add_cluster("behind", [spec])
    c = ct.cluster("behind")
    before = _forwards(jump_host)
    hostile = WEIRD + " ; touch ct-pwned-a"
    r = c.conn(0).run(["printf", "%s", hostile])
    assert r.rc == 0 and r.text == hostile
    assert _forwards(jump_host) == before + 1

    # rsync rides the same master: the folder (hostile name too) lands on host1, no new hop.
    local = in_tmp / "src" / WEIRD
    local.mkdir(parents=True)
    (local / "a.py").write_text("A = 1\n")
    [dest] = c.sync(local)
    assert Path(dest, "a.py").read_text() == "A = 1\n" and dest.startswith(spec.root)
    ctl = subprocess.run(["ssh", *c.conn(0).ssh_options(), "-O", "check", "--", spec.address],
                         capture_output=True, text=True)
    assert ctl.returncode == 0 and "Master running" in ctl.stderr
    assert _forwards(jump_host) == before + 1

    # A remote function: env, helper, and the agent socket forwarded over that master.
    try:
        assert ct.function(_double).to(c, env=Env(site_packages_from=sys.executable))(21) == 42
        assert _forwards(jump_host) == before + 1
    finally:
        c.down()  # the call agent it started on host1 would otherwise idle on for half an hour


def test_jump_chains_unknown_jump_keys_and_bad_jumps_from_the_cli(sshd_service, jump_host, ct_config, in_tmp):
    spec = _behind(sshd_service, jump_host, in_tmp)
    hop = spec.jump
    # Two hops (the jump host reaching itself, then host1): the ProxyCommands nest.
    r = cli("cluster", "add", "chain", f"{spec.address}:{spec.port}", "--user", spec.user, "--key", str(spec.key),
            "--known-hosts", str(spec.known_hosts), "--jump", f"{hop},{hop}", "--root", spec.root, cwd=in_tmp)
    assert r.returncode == 0, r.stderr
    assert get_cluster("chain").hosts[0].jump_hops() == [HostSpec.parse(hop)] * 2
    before = _forwards(jump_host)
    check = cli("cluster", "check", "chain", cwd=in_tmp)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "yes" in check.stdout and f"{spec.address}:{spec.port}" in check.stdout
    assert _forwards(jump_host) > before
    cli("cluster", "down", "chain", cwd=in_tmp)  # closes the master of that other process

    # The jump host's key is not in the cluster's known_hosts: refused, and the message names
    # the jump host and how to add its key (not the host behind it).
    untrusted = _behind(sshd_service, jump_host, in_tmp, trust_jump=False)
    with pytest.raises(HostKeyError) as info:
        Connection(untrusted).run(["true"])
    msg = str(info.value)
    assert "jump host" in msg and f"ssh-keyscan -p {jump_host.host.port} 127.0.0.1" in msg
    # Accepting new keys once covers the jump host too.
    assert Connection(untrusted, accept_new_host_key=True).run(["true"]).rc == 0
    assert len(Path(untrusted.known_hosts).read_text().splitlines()) == 2  # the jump host's key, added
    Connection(untrusted, accept_new_host_key=True).close()

    # Nothing listens behind the jump host at that port: the jump host's own answer is shown.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with pytest.raises(ClusterError, match="unreachable through jump host") as info:
        Connection(dataclasses.replace(spec, port=closed)).run(["true"])
    assert "Connection refused" in str(info.value) or "connect failed" in str(info.value), info.value

    bad = cli("cluster", "add", "bad", "h1", "--jump", "bastion;touch${IFS}ct-pwned-a", cwd=in_tmp)
    assert bad.returncode == 2 and "jump host" in bad.stderr and "Traceback" not in bad.stderr
    assert "bad" not in (ct_config / "clusters.yaml").read_text()
