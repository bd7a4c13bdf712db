"""Clusters over a real sshd on loopback: add/ls/check from the CLI, host key verification,
auth and reachability errors, one multiplexed connection per host, sync and exec with hostile
names that must reach the host verbatim and never run through a shell."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from clustertune.errors import ClusterError, HostKeyError
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import HostSpec, add_cluster, get_cluster
from clustertune.remote.transport import close_all
from tests.helpers import cli

HOSTILE = "we ird 'q\" ; touch /tmp/ct-pwned-{tag}"
# Folder names cannot hold "/": this one would create the marker in the login directory.
HOSTILE_NAME = "we ird 'q\" ; touch ct-pwned-{tag}"


def _hostile(tmp_path: Path, folder: bool = False) -> tuple[str, Path]:
    tag = tmp_path.name.replace(" ", "")
    marker = Path.home() / f"ct-pwned-{tag}" if folder else Path(f"/tmp/ct-pwned-{tag}")
    marker.unlink(missing_ok=True)
    return (HOSTILE_NAME if folder else HOSTILE).format(tag=tag), marker


def test_cluster_add_ls_check_from_the_cli(sshd_service, ct_config, tmp_path):
    h0, h1 = sshd_service.hosts
    r = cli("cluster", "add", "pair", f"127.0.0.1:{h0.port}", f"127.0.0.1:{h1.port}", "--user", sshd_service.user,
            "--key", str(sshd_service.client_key), "--known-hosts", str(sshd_service.known_hosts),
            "--root", str(h0.root / tmp_path.name))
    assert r.returncode == 0, r.stderr
    spec = get_cluster("pair")
    assert [h.port for h in spec.hosts] == [h0.port, h1.port]
    assert spec.hosts[0].user == sshd_service.user
    # The config file holds no secrets but is private anyway; the key file is referenced by path.
    assert (ct_config / "clusters.yaml").stat().st_mode & 0o077 == 0

    ls = cli("cluster", "ls")
    assert ls.returncode == 0 and f"127.0.0.1:{h0.port}" in ls.stdout and "pair" in ls.stdout

    check = cli("cluster", "check", "pair")
    assert check.returncode == 0, check.stderr
    assert check.stdout.count("yes") == 2  # both reachable
    assert "3." in check.stdout  # the hosts' Python version

    rows = Cluster.named("pair").check()
    assert all(row["ok"] for row in rows)
    assert rows[0]["free_disk_gib"] > 0 and rows[0]["gpus"] == [] and rows[0]["envs"] == []


def test_bad_cluster_input_is_a_user_error(ct_config):
    r = cli("cluster", "add", "bad name!", "127.0.0.1")
    assert r.returncode == 2 and "cluster name" in r.stderr and "Traceback" not in r.stderr
    r = cli("cluster", "add", "ok", "--", "-oProxyCommand=touch /tmp/x")
    assert r.returncode == 2 and "may not start with '-'" in r.stderr
    r = cli("cluster", "check", "nosuch")
    assert r.returncode == 2 and "no cluster 'nosuch'" in r.stderr and "cluster add" in r.stderr
    with pytest.raises(ClusterError, match="port"):
        HostSpec.parse("host:99999")


def _one_host(sshd_service, tmp_path, **over) -> Cluster:
    h = sshd_service.hosts[0]
    fields = dict(address=h.address, port=h.port, user=sshd_service.user, key=str(sshd_service.client_key),
                  root=str(h.root / tmp_path.name), known_hosts=str(sshd_service.known_hosts))
    fields.update(over)
    return Cluster(add_cluster("one", [HostSpec(**fields)]))


def test_unknown_host_key_is_refused_until_accepted(sshd_service, ct_config, tmp_path):
    empty = tmp_path / "empty known_hosts"  # a space: the option value must stay one path
    empty.write_text("")
    c = _one_host(sshd_service, tmp_path, known_hosts=str(empty))
    with pytest.raises(HostKeyError) as info:
        c.conn(0).run(["true"])
    msg = str(info.value)
    assert "not in" in msg and "ssh-keyscan" in msg and "--accept-new-host-keys" in msg
    assert empty.read_text() == ""

    r = cli("cluster", "check", "one")
    assert r.returncode == 2 and "host key" in r.stderr

    # Accepting explicitly records the key; afterwards strict checking passes.
    r = cli("cluster", "check", "one", "--accept-new-host-keys")
    assert r.returncode == 0, r.stderr
    assert sshd_service.hosts[0].host_key_pub.read_text().split()[1] in empty.read_text()
    close_all()
    assert Cluster.named("one").conn(0).run(["true"]).rc == 0


def test_changed_host_key_is_refused_even_with_accept_new(sshd_service, ct_config, tmp_path):
    other = tmp_path / "otherkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kt, kb = other.with_suffix(".pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd_service.hosts[0].port} {kt} {kb}\n")
    for accept in (False, True):
        c = Cluster(get_cluster(_one_host(sshd_service, tmp_path, known_hosts=str(kh)).name), accept_new_host_keys=accept)
        with pytest.raises(HostKeyError, match="CHANGED") as info:
            c.conn(0).run(["true"])
        assert "ssh-keygen -R" in str(info.value)


def test_auth_failure_and_unreachable_host(sshd_service, ct_config, tmp_path):
    wrong = tmp_path / "wrongkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    c = _one_host(sshd_service, tmp_path, key=str(wrong))
    with pytest.raises(ClusterError, match="authentication failed"):
        c.conn(0).run(["true"])

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    c = _one_host(sshd_service, tmp_path, port=dead_port)
    with pytest.raises(ClusterError, match="unreachable") as info:
        c.conn(0).run(["true"])
    assert str(dead_port) in str(info.value)


def test_one_multiplexed_connection_per_host(ssh_cluster, sshd_service):
    c = Cluster(ssh_cluster)
    conn = c.conn(0)
    for _ in range(3):
        assert conn.run(["true"]).rc == 0
    # The master answers `-O check`; all three commands went through it.
    ctl = subprocess.run(["ssh", *conn.ssh_options(), "-O", "check", "--", conn.host.address], capture_output=True, text=True)
    assert ctl.returncode == 0 and "Master running" in ctl.stderr


def test_hostile_argument_reaches_the_host_verbatim(ssh_cluster, tmp_path):
    hostile, marker = _hostile(tmp_path)
    r = Cluster(ssh_cluster).conn(0).run(["printf", "%s", hostile])
    assert r.rc == 0 and r.text == hostile
    assert not marker.exists()


def test_sync_hostile_folder_name_respects_gitignore(ssh_cluster, tmp_path):
    hostile, marker = _hostile(tmp_path, folder=True)
    local = tmp_path / hostile
    (local / "pkg").mkdir(parents=True)
    (local / "pkg" / "a.py").write_text("A = 1\n")
    (local / "big.bin").write_bytes(b"x" * 100)
    (local / ".gitignore").write_text("*.bin\n")
    r = cli("sync", "loop", str(local))
    assert r.returncode == 0, r.stderr
    for host_root in ssh_cluster.hosts:
        dest = Path(host_root.root) / hostile
        assert (dest / "pkg" / "a.py").read_text() == "A = 1\n"
        assert not (dest / "big.bin").exists()
    # A second sync mirrors deletions.
    (local / "pkg" / "a.py").unlink()
    Cluster(ssh_cluster).sync(local, "mirror dir")
    assert not (Path(ssh_cluster.hosts[0].root) / "mirror dir" / "pkg" / "a.py").exists()
    assert not marker.exists()


def test_exec_on_all_hosts_is_a_run_with_logs(ssh_cluster, tmp_path):
    hostile, marker = _hostile(tmp_path)
    r = cli("exec", "loop", "--", "python", "-c", "import sys, os; print('ARG=' + sys.argv[1]); print('ENV=' + os.environ['VIRTUAL_ENV'])", hostile)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(f"ARG={hostile}") == 2  # both hosts, streamed
    assert not marker.exists()
    run_id = r.stderr.strip().splitlines()[-1].split()[-1]
    status = cli("status", run_id)
    assert status.returncode == 0 and "COMPLETED" in status.stdout
    logs = cli("logs", run_id)
    assert logs.stdout.count(f"ARG={hostile}") == 2 and "[node 1]" in logs.stdout
    one = cli("logs", run_id, "--node", "1")
    assert one.stdout.count("ARG=") == 1
    info = json.loads((Path(os.environ["CLUSTERTUNE_RUNS"]) / run_id / "run.json").read_text())
    assert info["backend"] == "ssh-remote" and info["remote"]["nodes"] == [0, 1]

    # A failing command: its exit code comes back, the run is FAILED.
    r = cli("exec", "loop", "--host", "1", "--", "sh", "-c", "echo boom; exit 3")
    assert r.returncode == 3 and "boom" in r.stdout
    run_id = r.stderr.strip().splitlines()[-1].split()[-1]
    assert "FAILED" in cli("status", run_id).stdout
    listed = cli("runs", "--cluster", "loop")
    assert listed.stdout.count("remote_exec") == 2
    assert "no runs" in cli("runs", "--cluster", "other").stdout


def test_exec_a_script_from_a_synced_folder_then_gc(ssh_cluster, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("import os, sys\nprint('lr', sys.argv[1], 'in', os.path.basename(os.getcwd()))\n")
    assert cli("sync", "loop", str(proj), "my proj").returncode == 0
    r = cli("exec", "loop", "--host", "0", "--cd", "my proj", "--", "python", "train.py", "3e-4")
    assert r.returncode == 0, r.stderr
    assert "lr 3e-4 in my proj" in r.stdout
    run_id = r.stderr.strip().splitlines()[-1].split()[-1]
    env_line = cli("exec", "loop", "--host", "0", "--", "sh", "-c", 'echo "$VIRTUAL_ENV"')
    assert env_line.stdout.strip().startswith(str(Path(ssh_cluster.hosts[0].root) / "envs"))
    runs_dir = Path(ssh_cluster.hosts[0].root) / "runs"
    assert (runs_dir / run_id).is_dir()
    kept = cli("cluster", "gc", "loop")  # default: only what is older than 7 days
    assert kept.returncode == 0 and (runs_dir / run_id).is_dir()
    gone = cli("cluster", "gc", "loop", "--older-than-days", "0")
    assert gone.returncode == 0 and f"runs/{run_id}" in gone.stdout
    assert not (runs_dir / run_id).exists()
    r = cli("logs", run_id)
    assert r.returncode == 2 and "removed by gc" in r.stderr
