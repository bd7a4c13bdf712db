"""Remote functions over a real sshd: envs, sync and async calls, refs that stay on the host,
run keys from new processes, remote exceptions, signed results, and every bad-input case."""

from __future__ import annotations

import hashlib
import os
import pickle
import secrets
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

import clustertune as ct
from clustertune.errors import ClusterError, EnvError, RemoteCallError, RunError
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import HostSpec, add_cluster
from clustertune.remote.envs import Env
from clustertune.calls.functions import ConnectionLost, get_ref
from clustertune.runs.state import RunState
from tests.helpers import cli


def _wheel(path: Path, value: str) -> Path:
    """A minimal pure-Python wheel (built by hand: installs offline, no build backend)."""
    whl = path / "ctlocalpkg-0.1-py3-none-any.whl"
    path.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("ctlocalpkg/__init__.py", f"VALUE = {value!r}\n")
        z.writestr("ctlocalpkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: ctlocalpkg\nVersion: 0.1\n")
        z.writestr("ctlocalpkg-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("ctlocalpkg-0.1.dist-info/RECORD", "ctlocalpkg/__init__.py,,\nctlocalpkg-0.1.dist-info/METADATA,,\n"
                   "ctlocalpkg-0.1.dist-info/WHEEL,,\nctlocalpkg-0.1.dist-info/RECORD,,\n")
    return whl


def _read_value() -> str:
    import ctlocalpkg
    import yaml  # from the inherited site-packages: nothing installed for it

    return f"{ctlocalpkg.VALUE} {yaml.__name__} {sys.prefix}"


def test_env_built_once_reused_and_rebuilt_when_changed(ssh_cluster, tmp_path):
    whl = _wheel(tmp_path / "dist", "v1")
    env = Env(requirements=[str(whl)], pip_args=["--no-index"], site_packages_from=sys.executable)
    c = ct.cluster("loop")
    h = c.ensure_env(1, env)
    env_dir = Path(ssh_cluster.hosts[1].root) / "envs" / h
    assert (env_dir / ".ready").is_file()
    value = ct.function(_read_value).to(c, env=env, host=1)()
    assert value.startswith("v1 yaml ") and value.endswith(h)
    # Unchanged: reused as it is, also by a fresh handle (nothing cached in this process).
    stamp = (env_dir / ".ready").stat().st_mtime_ns
    assert ct.cluster("loop").ensure_env(1, env) == h
    assert (env_dir / ".ready").stat().st_mtime_ns == stamp
    # Changed content of a local package: a new hash, a new env.
    _wheel(tmp_path / "dist", "v2")
    h2 = c.ensure_env(1, env)
    assert h2 != h
    assert ct.function(_read_value).to(c, env=env, host=1)().startswith("v2 ")
    assert not (Path(ssh_cluster.hosts[0].root) / "envs").exists()  # host 0 was never asked


def test_bad_requirement_shows_pips_error(ssh_cluster):
    env = Env(requirements=["definitely not a requirement!!"])
    with pytest.raises(EnvError) as info:
        ct.cluster("loop").ensure_env(0, env, stream=False)
    assert "Invalid requirement" in str(info.value) or "invalid requirement" in str(info.value).lower()
    assert "fix the requirement" in str(info.value)


def test_host_without_python(ssh_cluster, sshd_service, tmp_path):
    h = ssh_cluster.hosts[0]
    spec = add_cluster("nopy", [HostSpec(address=h.address, port=h.port, user=h.user, key=h.key, root=h.root,
                                         known_hosts=h.known_hosts, python="/nonexistent/python3")])
    with pytest.raises(ClusterError, match="was not found there"):
        Cluster(spec).helper(0, "check")


def _double(x):
    print(f"doubling {x}", flush=True)
    return 2 * x


def test_sync_call_streams_logs_and_async_ref(ssh_cluster, capfd):
    c = ct.cluster("loop")
    f = ct.function(_double).to(c)
    # Plain sync calls go through the env's agent on the host; killing it loses nothing: the
    # next call falls back to a plain start and brings the agent back.
    assert f(1) == 2
    pid_files = list((Path(ssh_cluster.hosts[0].root) / "agents").iterdir())
    assert len(pid_files) == 1
    old_pid = int(pid_files[0].read_text())
    os.kill(old_pid, 9)
    assert [f(2), f(3)] == [4, 6]
    new_pid = int(pid_files[0].read_text())
    assert new_pid != old_pid
    os.kill(new_pid, 0)  # alive
    assert f(21, stream_logs=True) == 42
    assert "doubling 21" in capfd.readouterr().err
    ref = f.remote(5)
    assert ref.result() == 10
    assert ref.status() is RunState.COMPLETED
    assert "doubling 5" in ref.logs()
    run = ct.get_run(ref.run_key)
    assert run.info.backend == "ssh-remote" and run.state is RunState.COMPLETED
    # Lambdas and closures travel by value.
    k = 7
    assert ct.function(lambda y: y + k).to(c)(1) == 8


def _make_data(n):
    return os.urandom(n)


def _digest(data):
    return len(data), hashlib.sha256(data).hexdigest()


def test_ref_argument_is_loaded_on_the_host_and_data_never_comes_back(ssh_cluster):
    c = ct.cluster("loop")
    size = 8 * 2**20
    before = c.bytes_received()
    ref = ct.function(_make_data).to(c, host=1).remote(size)
    n, digest = ct.function(_digest).to(c)(ref)  # runs on host 1, where the ref's data is
    received = c.bytes_received() - before
    assert n == size
    stored = Path(ssh_cluster.hosts[1].root) / "runs" / ref.run_key / "result.pkl"
    assert stored.stat().st_size > size  # the data is on the host...
    assert received < 64 * 1024, f"{received} bytes came back"  # ...and did not travel
    assert ref.status() is RunState.COMPLETED
    assert hashlib.sha256(pickle.loads(stored.read_bytes())[1]).hexdigest() == digest


class Boom(ValueError):
    pass


def _fail(x):
    def inner():
        raise Boom(f"bad value {x}")

    inner()


def test_remote_exception_is_reraised_with_the_remote_traceback(ssh_cluster):
    f = ct.function(_fail).to(ct.cluster("loop"))
    with pytest.raises(Boom, match="bad value 3") as info:
        f(3)
    cause = info.value.__cause__
    assert cause is not None and "in inner" in str(cause) and "in _fail" in str(cause)
    ref = f.remote(4)
    with pytest.raises(Boom, match="bad value 4"):
        ref.result()
    assert ref.status() is RunState.FAILED


def _slow_counter(n):
    for i in range(n):
        print(f"tick {i}", flush=True)
        time.sleep(0.2)
    return "done"


def test_logs_status_cancel_by_run_key_from_new_processes(ssh_cluster):
    ref = ct.function(_slow_counter).to(ct.cluster("loop")).remote(600)
    deadline = time.time() + 30
    while "tick 2" not in cli("logs", ref.run_key).stdout:
        assert time.time() < deadline
        time.sleep(0.3)
    st = cli("status", ref.run_key)
    assert st.returncode == 0 and "RUNNING" in st.stdout
    # `logs --follow` in another process: it prints as the run goes and ends when it ends.
    follower = subprocess.Popen([str(Path(sys.executable).with_name("clustertune")), "logs", ref.run_key, "--follow"],
                                stdout=subprocess.PIPE, text=True)
    r = cli("cancel", ref.run_key)
    assert r.returncode == 0 and "CANCELLED" in r.stdout, r.stderr
    followed, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0 and "tick 0" in followed and "tick 2" in followed
    assert ref.status() is RunState.CANCELLED
    state = (Path(ssh_cluster.hosts[0].root) / "runs" / ref.run_key / "state.json").read_text()
    assert '"CANCELLED"' in state
    # A finished run follows to its end at once; a second cancel is a user error.
    follow = cli("logs", ref.run_key, "--follow")
    assert follow.returncode == 0 and "tick 0" in follow.stdout
    again = cli("cancel", ref.run_key)
    assert again.returncode == 2 and "already CANCELLED" in again.stderr


def test_unknown_run_key_and_function_not_found(ssh_cluster):
    with pytest.raises(RunError, match="no run"):
        get_ref("no-such-key")
    r = cli("status", "no-such-key")
    assert r.returncode == 2 and "no run" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(LookupError, match="not found on this host"):
        ct.function("no_such_module_ct:fn").to(ct.cluster("loop"))()
    with pytest.raises(RemoteCallError, match="module:function"):
        ct.function("no-colon").to(ct.cluster("loop"))


class _Planted:
    def __reduce__(self):
        return (os.system, ("touch /tmp/ct-planted-ran",))


def test_results_are_loaded_only_from_this_clients_run_keys(ssh_cluster, ct_config, tmp_path, monkeypatch):
    Path("/tmp/ct-planted-ran").unlink(missing_ok=True)
    c = ct.cluster("loop")
    ref = ct.function(_double).to(c).remote(1)
    assert ref.result() == 2
    # Someone with access to the host replaces the stored result: it is refused, never unpickled.
    stored = Path(ssh_cluster.hosts[0].root) / "runs" / ref.run_key / "result.pkl"
    stored.write_bytes(pickle.dumps(("ok", _Planted(), "")))
    with pytest.raises(RemoteCallError, match="not signed by this client"):
        ref.result()
    assert not Path("/tmp/ct-planted-ran").exists()
    # Another client identity (a new key) does not load this client's results either.
    ref2 = ct.function(_double).to(c).remote(2)
    assert ref2.result() == 4
    (ct_config / "identity.key").write_text(secrets.token_hex(32) + "\n")
    with pytest.raises(RemoteCallError, match="another client identity"):
        ref2.result()
    # The identity key is private.
    assert (ct_config / "identity.key").stat().st_mode & 0o077 == 0


def _secret_digest():
    return hashlib.sha256(os.environ["CT_TEST_SECRET"].encode()).hexdigest(), os.environ["PLAIN_VAR"]


def test_secrets_reach_the_call_but_no_file(ssh_cluster, tmp_path, monkeypatch):
    value = "s3cr3t-" + secrets.token_hex(8)
    monkeypatch.setenv("CT_TEST_SECRET", value)
    env = Env(secrets=["CT_TEST_SECRET"], env_vars={"PLAIN_VAR": "plain"})
    f = ct.function(_secret_digest).to(ct.cluster("loop"), env=env)
    assert f() == (hashlib.sha256(value.encode()).hexdigest(), "plain")
    for root in [Path(h.root) for h in ssh_cluster.hosts] + [tmp_path / "runs"]:
        for p in root.rglob("*"):
            if p.is_file():
                assert value.encode() not in p.read_bytes(), p
    monkeypatch.delenv("CT_TEST_SECRET")
    with pytest.raises(EnvError, match="CT_TEST_SECRET"):
        f()


def test_import_path_functions_run_from_a_snapshot(ssh_cluster, tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    (proj / "ctproj").mkdir(parents=True)
    (proj / "ctproj" / "__init__.py").write_text("")
    mod = proj / "ctproj" / "work.py"
    mod.write_text("import time\n\ndef slow_version():\n    time.sleep(1.5)\n    from ctproj import data\n    return data.VERSION\n")
    (proj / "ctproj" / "data.py").write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(proj))
    from ctproj.work import slow_version

    f = ct.function(slow_version).to(ct.cluster("loop"), workdir=proj)
    assert f.spec["kind"] == "import"  # sent by name, not by value
    ref = f.remote()
    (proj / "ctproj" / "data.py").write_text("VERSION = 2\n")  # edited while the run is queued/running
    assert ref.result() == 1
    assert f() == 2  # a new call takes a new snapshot


def _sleep_then(x):
    time.sleep(3)
    return x


def test_connection_drop_mid_call_loses_nothing(ssh_cluster):
    c = ct.cluster("loop")
    f = ct.function(_sleep_then).to(c)
    assert f(0) == 0  # warm: env and helper present
    conn = c.conn(0)

    def drop():
        time.sleep(1.0)
        subprocess.run(["ssh", *conn.ssh_options(), "-O", "exit", "--", conn.host.address], capture_output=True)

    t = threading.Thread(target=drop)
    t.start()
    with pytest.raises(ConnectionLost) as info:
        f(42)
    t.join()
    key = info.value.run_key
    assert "goes on" in str(info.value)
    assert get_ref(key).result() == 42
    assert ct.get_run(key).state is RunState.COMPLETED


def _visible_devices():
    return os.environ.get("CUDA_VISIBLE_DEVICES", "unset")


def test_gpus_on_a_host_without_gpus(ssh_cluster):
    """Without GPUs a call still runs (gpus=0, devices left alone); asking for one is refused
    before anything starts there, with a typed error that says what to do (CLI: exit 2)."""
    c = ct.cluster("loop")
    assert ct.function(_visible_devices).to(c)() == "unset"
    runs = Path(ssh_cluster.hosts[0].root) / "runs"
    before = sorted(p.name for p in runs.iterdir())
    with pytest.raises(RemoteCallError, match="no NVIDIA GPU") as info:
        ct.function(_double).to(c, gpus=1)(1)
    assert "gpus=0" in str(info.value)
    assert sorted(p.name for p in runs.iterdir()) == before  # no run was started for it
    out = cli("exec", "loop", "--host", "0", "--gpus", "1", "--", "true")
    assert out.returncode == 2 and "no NVIDIA GPU" in out.stderr and "Traceback" not in out.stderr
