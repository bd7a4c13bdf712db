"""SSH cluster config, identity key, env hashing and quoting: no sshd needed."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from clustertune.errors import ClusterError, EnvError
from clustertune.remote.config import (HostSpec, add_cluster, client_id, clusters_file, get_cluster, identity_key,
                                       list_clusters, remove_cluster, run_secret)
from clustertune.remote.envs import Env, folder_files
from clustertune.remote.transport import Connection, shell_join


def test_host_parsing_and_validation():
    h = HostSpec.parse("alice@gpu1:2222", key="/k", root="ct root")
    assert (h.user, h.address, h.port, h.key, h.root) == ("alice", "gpu1", 2222, "/k", "ct root")
    assert HostSpec.parse("gpu2", user="bob", port=22).label == "bob@gpu2:22"
    for bad in ("-oProxyCommand=x", "a b", "host;rm", ""):
        with pytest.raises(ClusterError):
            HostSpec.parse(bad)
    with pytest.raises(ClusterError, match="user"):
        HostSpec(address="h", user="-l")
    with pytest.raises(ClusterError, match="jump"):
        HostSpec(address="h", jump="-oProxyCommand=x")


def test_clusters_round_trip_in_a_private_file(ct_config):
    add_cluster("c1", [HostSpec.parse("h1:2200"), HostSpec.parse("u@h2")])
    assert [h.label for h in get_cluster("c1").hosts] == ["h1:2200", "u@h2"]
    assert clusters_file().stat().st_mode & 0o077 == 0
    assert [c.name for c in list_clusters()] == ["c1"]
    with pytest.raises(ClusterError, match="cluster add c2"):
        get_cluster("c2")
    remove_cluster("c1")
    assert list_clusters() == []
    clusters_file().write_text("clusters:\n  c3:\n    hosts:\n      - {address: h, colour: red}\n")
    with pytest.raises(ClusterError, match="colour"):
        get_cluster("c3")


def test_identity_key_is_private_and_stable(ct_config):
    k = identity_key()
    assert len(k) == 32 and identity_key() == k
    assert (ct_config / "identity.key").stat().st_mode & 0o777 == 0o600
    assert run_secret("a") != run_secret("b") and client_id() == client_id()
    (ct_config / "identity.key").chmod(0o644)
    with pytest.raises(ClusterError, match="chmod 600"):
        identity_key()


def test_env_hash_tracks_what_is_installed_not_runtime_vars(tmp_path):
    base = Env(requirements=["a==1"])
    assert base.content_hash("python3") == Env(requirements=["a==1"], env_vars={"X": "1"}).content_hash("python3")
    assert base.content_hash("python3") != Env(requirements=["a==2"]).content_hash("python3")
    assert base.content_hash("python3") != base.content_hash("/opt/py/bin/python3")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("x = 1\n")
    e = Env(requirements=[str(pkg)])
    h1 = e.content_hash("python3")
    (pkg / "m.py").write_text("x = 2\n")
    assert e.content_hash("python3") != h1
    with pytest.raises(EnvError, match="variable name"):
        Env(secrets=["BAD-NAME"])


def test_folder_files_respects_gitignore_without_git(tmp_path):
    (tmp_path / "keep.py").write_text("")
    (tmp_path / "skip.bin").write_text("")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "x.py").write_text("")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "c.pyc").write_text("")
    (tmp_path / ".gitignore").write_text("*.bin\nbuild/\n")
    assert folder_files(tmp_path) == [".gitignore", "keep.py"]


def test_remote_commands_are_quoted_word_by_word(tmp_path):
    hostile = "we ird 'q\" ; touch " + str(tmp_path / "pwned")
    line = shell_join(["printf", "%s\\n", hostile], "&&", ["echo", "second"])
    assert shlex.split(line) == ["printf", "%s\\n", hostile, "&&", "echo", "second"]
    # What the remote login shell does with it: two commands, the hostile word kept whole.
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True)
    assert out.stdout.splitlines() == [hostile, "second"]
    assert not (tmp_path / "pwned").exists()


def test_ssh_argv_pins_host_key_checking_and_keeps_paths_whole():
    c = Connection(HostSpec(address="h", port=2222, user="u", key="/a b/key", known_hosts="/x y/kh"))
    argv = c.ssh_argv("true")
    assert "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
    assert 'UserKnownHostsFile="/x y/kh"' in argv and 'IdentityFile="/a b/key"' in argv
    assert argv[-3:] == ["--", "h", "true"]
    assert "StrictHostKeyChecking=accept-new" in Connection(HostSpec(address="h"), accept_new_host_key=True).ssh_argv()
    # Different settings, different master sockets (a master never skips another's checks).
    other = Connection(HostSpec(address="h", port=2222, user="u", key="/a b/key"))
    sock = [a for a in argv if a.startswith("ControlPath=")]
    assert sock and sock[0] not in other.ssh_argv("true")


def test_cli_cold_start_does_not_import_torch():
    code = ("import sys; from clustertune.cli import main; "
            "import clustertune.cli.cluster_cmds; print(json.dumps(['torch' in sys.modules, 'cloudpickle' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, False]


def _ssh_config(argv: list[str]) -> dict[str, str]:
    """What ssh itself makes of an argv (``ssh -G``: options parsed, nothing connected)."""
    out = subprocess.run(["ssh", "-G", *argv[1:]], capture_output=True, text=True, check=True).stdout
    return {k: v for k, _, v in (line.partition(" ") for line in out.splitlines()) if k in
            ("hostname", "port", "user", "identityfile", "userknownhostsfile", "proxycommand", "batchmode")}


def _run_proxy(proxy: str, host: str, port: str) -> list[str]:
    """The argv ssh runs for a ProxyCommand: %-tokens expanded once, then split by the shell."""
    return shlex.split(re.sub(r"%(.)", lambda m: {"h": host, "p": port, "%": "%"}[m.group(1)], proxy))


def test_every_jump_hop_gets_the_clusters_key_and_known_hosts():
    if shutil.which("ssh") is None and os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") != "1":
        pytest.skip("needs the OpenSSH client (`ssh -G` parses the options); apt-get install openssh-client")
    weird = "/k ey's \"dir\" ; touch ct-pwned $(touch ct-pwned) %h"
    host = HostSpec(address="inner", port=2200, user="u", key=weird + "/id", known_hosts=weird + "/kh",
                    jump="a@bastion:2222,b@gate")
    assert [(h.user, h.address, h.port) for h in host.jump_hops()] == [("a", "bastion", 2222), ("b", "gate", None)]
    target = _ssh_config(Connection(host).ssh_argv())
    assert (target["hostname"], target["port"], target["user"]) == ("inner", "2200", "u")
    # Paths stay whole through ssh's quoting and %-expansion (-G shows known_hosts expanded).
    assert target["userknownhostsfile"] == weird + "/kh"
    # The last hop first: its ssh forwards stdio to the host and nests the hop before it.
    gate_argv = _run_proxy(target["proxycommand"], "inner", "2200")
    assert gate_argv[0] == "ssh" and gate_argv[-4:] == ["-W", "inner:2200", "--", "gate"]
    gate = _ssh_config(gate_argv[:-4] + ["--", "gate"])
    assert (gate["hostname"], gate["user"], gate["batchmode"]) == ("gate", "b", "yes")
    assert gate["identityfile"] == target["identityfile"] and gate["userknownhostsfile"] == weird + "/kh"
    bastion_argv = _run_proxy(gate["proxycommand"], "gate", "22")
    assert bastion_argv[-4:] == ["-W", "gate:22", "--", "bastion"]
    bastion = _ssh_config(bastion_argv[:-4] + ["--", "bastion"])
    assert (bastion["port"], bastion["user"]) == ("2222", "a")
    assert bastion["identityfile"] == target["identityfile"] and bastion["userknownhostsfile"] == weird + "/kh"
    assert "proxycommand" not in bastion


def test_bad_jump_hosts_are_refused_before_any_ssh():
    for bad in ("bastion;touch${IFS}x", "a,,b", "a@-oProxyCommand=x", "a,b:notaport", "$(x)"):
        with pytest.raises(ClusterError, match="jump host"):
            HostSpec(address="h", jump=bad)


def test_ssh_control_directory_must_be_private_to_this_user(tmp_path, monkeypatch):
    from clustertune.remote.transport import control_dir

    d = tmp_path / "ctl"
    monkeypatch.setenv("CLUSTERTUNE_SSH_CONTROL_DIR", str(d))
    assert control_dir() == d and (d.stat().st_mode & 0o777) == 0o700
    d.chmod(0o777)  # as a directory someone else made for us would be
    with pytest.raises(ClusterError, match=r"ctl is not a private directory.*mode 777.*CLUSTERTUNE_SSH_CONTROL_DIR"):
        control_dir()
    d.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    d.symlink_to(tmp_path / "elsewhere")  # a link planted where the directory should be
    with pytest.raises(ClusterError, match="not a private directory"):
        control_dir()


def test_concurrent_first_uses_share_one_identity_key(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(tmp_path / "cfg"))
    got: list[bytes] = []
    start = threading.Barrier(8)

    def first_use() -> None:
        start.wait()
        got.append(identity_key())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1
    assert [p.name for p in (tmp_path / "cfg").iterdir()] == ["identity.key"]  # no temporary files left
    assert ((tmp_path / "cfg" / "identity.key").stat().st_mode & 0o777) == 0o600


def test_a_tilde_root_is_the_login_directory_as_a_relative_root_is(ct_config):
    """Every remote path is quoted, so no shell on the host would expand a '~': `~/X` is kept as
    `X` (relative roots are under the login directory, as '~' is), the same for every command
    and rsync; a root that needs another user's home or a variable is refused with the fix."""
    from clustertune.cli.main import main
    from clustertune.remote.cluster import Cluster

    assert HostSpec(address="h", root="~/ct work").root == "ct work"
    assert HostSpec(address="h", root="~").root == "."
    assert HostSpec(address="h", root="~/").root == "."
    assert HostSpec(address="h", root="/abs/~x").root == "/abs/~x"  # not at the start: a plain name
    assert main(["cluster", "add", "tl", "127.0.0.1", "--root", "~/X"]) == 0
    (host,) = get_cluster("tl").hosts
    assert host.root == "X" and "root: X" in clusters_file().read_text()
    cluster = Cluster.named("tl")
    assert "~" not in cluster.runner_path(0) and cluster.runner_path(0).startswith("X/")
    for bad, says in (("~bob/X", "another user's home"), ("$HOME/X", "not expanded"), ("${SCRATCH}/ct", "not expanded")):
        with pytest.raises(ClusterError, match=re.escape(f"remote root {bad!r} of host h") + ".*" + says):
            HostSpec(address="h", root=bad)
