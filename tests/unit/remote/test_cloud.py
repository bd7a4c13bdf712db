"""Cloud clusters, the parts that need no SkyPilot: requests, guards, preemption, key pinning."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clustertune.errors import ClusterError
from clustertune.calls import clusters
from clustertune.remote import cloud, sky_env
from clustertune.remote.config import HostSpec, add_cluster, get_cluster
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from tests.helpers import cli


@pytest.fixture
def no_sky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No SkyPilot environment anywhere: every bridge call fails with SkyEnvMissing."""
    monkeypatch.delenv(sky_env.PYTHON_ENV, raising=False)
    monkeypatch.setenv(sky_env.VENVS_ENV, str(tmp_path / "no-venvs"))
    return tmp_path / "no-venvs"


def test_autostop_durations():
    assert cloud.parse_autostop("30m") == 30
    assert cloud.parse_autostop("2h") == 120
    assert cloud.parse_autostop("45") == 45
    assert cloud.parse_autostop(None) is None and cloud.parse_autostop("off") is None
    for bad in ("0", "30s", "-5m", "soon", "1.5h"):
        with pytest.raises(ClusterError, match="--autostop"):
            cloud.parse_autostop(bad)


def test_spec_validation_and_differences():
    a = cloud.CloudSpec(gpus="A10G:1", infra="aws", nodes=2, spot=True)
    for bad in ("", "A10G:x", "-oProxy", "A10G 1", "a;b"):
        with pytest.raises(ClusterError, match="--gpus"):
            cloud.CloudSpec(gpus=bad)
    with pytest.raises(ClusterError, match="--nodes"):
        cloud.CloudSpec(gpus="A10G:1", nodes=0)
    assert a.differences(cloud.CloudSpec(gpus="A10G:1", infra="aws", nodes=2, spot=True)) == []
    diff = a.differences(cloud.CloudSpec(gpus="H100:8", infra="aws", nodes=1, spot=True))
    assert diff == ["gpus: 'A10G:1' (existing) vs 'H100:8' (asked)", "nodes: 2 (existing) vs 1 (asked)"]


def test_missing_sky_environment_says_run_cloud_setup(no_sky: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with pytest.raises(sky_env.SkyEnvMissing, match="clustertune cloud setup"):
        cloud.bridge({"op": "version"})
    monkeypatch.setenv(sky_env.PYTHON_ENV, str(tmp_path / "nope" / "python"))
    with pytest.raises(sky_env.SkyEnvMissing, match="CLUSTERTUNE_SKY_PYTHON"):
        sky_env.sky_python()
    # The venv is keyed by the requirements: a half-built one (no ready marker) is not used.
    monkeypatch.delenv(sky_env.PYTHON_ENV)
    (sky_env.venv_dir() / "bin").mkdir(parents=True)
    with pytest.raises(sky_env.SkyEnvMissing):
        sky_env.sky_python()
    assert sky_env.venv_dir().name == sky_env.requirements_hash()
    assert "skypilot==" in sky_env.pinned()


def test_errors_name_the_fix():
    py = Path("/venv/bin/python")
    no_cloud = cloud.cloud_error({"kind": "no_cloud", "type": "NoCloudAccessError", "message": "No cloud access"}, py)
    assert "/venv/bin/sky check" in str(no_cloud) and "NoCloudAccessError" in str(no_cloud)
    capacity = cloud.cloud_error({"kind": "capacity", "type": "ResourcesUnavailableError", "message": "x"}, py)
    assert "quota" in str(capacity) and "--infra" in str(capacity)
    other = cloud.cloud_error({"kind": "other", "type": "RuntimeError", "message": "boom"}, py)
    assert str(other) == "SkyPilot: RuntimeError: boom" and other.kind == "other" and capacity.kind == "capacity"


def _record(**over):
    rec = {"name": "a10", "status": "UP", "ssh_user": "ubuntu", "ssh_private_key": "/k",
           "nodes": [{"address": "3.4.5.6", "port": 22}, {"address": "3.4.5.7", "port": 2200}]}
    rec.update(over)
    return rec


def test_hosts_from_record(tmp_path: Path):
    hosts = cloud.hosts_from_record(_record(), tmp_path / "kh")
    assert [h.label for h in hosts] == ["ubuntu@3.4.5.6:22", "ubuntu@3.4.5.7:2200"]
    assert {h.known_hosts for h in hosts} == {str(tmp_path / "kh")} and hosts[0].key == "/k"
    with pytest.raises(cloud.CloudError, match="STOPPED, not UP"):
        cloud.hosts_from_record(_record(status="STOPPED"), tmp_path / "kh")
    with pytest.raises(cloud.CloudError, match="no SSH address"):
        cloud.hosts_from_record(_record(nodes=[]), tmp_path / "kh")
    with pytest.raises(cloud.CloudError, match="proxy command"):
        cloud.hosts_from_record(_record(ssh_proxy_command="ssh -W %h:%p bastion"), tmp_path / "kh")
    with pytest.raises(ClusterError, match="not a host name"):  # an address that would be an ssh option
        cloud.hosts_from_record(_record(nodes=[{"address": "-oProxyCommand=x", "port": 22}]), tmp_path / "kh")


def test_fingerprints_match_ssh_keygen_and_pins_are_private(tmp_path: Path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hk")], check=True)
    pub = (tmp_path / "hk.pub").read_text().strip()
    expected = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "hk.pub")], capture_output=True,
                              text=True, check=True).stdout.split()[1]
    assert cloud.fingerprint(pub) == expected
    kh = tmp_path / "pins" / "known_hosts"
    shown = cloud.pin_host_keys([{"address": "3.4.5.6", "port": 22, "keys": [pub]},
                                 {"address": "127.0.0.1", "port": 2200, "keys": [pub]}], kh)
    assert shown == [f"3.4.5.6:22 ssh-ed25519 {expected}", f"127.0.0.1:2200 ssh-ed25519 {expected}"]
    lines = kh.read_text().splitlines()
    assert lines[0].startswith("3.4.5.6 ssh-ed25519 ") and lines[1].startswith("[127.0.0.1]:2200 ssh-ed25519 ")
    assert kh.stat().st_mode & 0o077 == 0
    with pytest.raises(cloud.CloudError, match="no host keys"):
        cloud.pin_host_keys([{"address": "3.4.5.6", "port": 22, "keys": []}], kh)


def test_private_key_sent_by_the_api_server_is_kept_private(ct_config: Path):
    rec = cloud.keep_private_key("a10", _record(ssh_private_key="~/.sky/ssh/sky-key",
                                               ssh_private_key_content="-----BEGIN KEY-----\nabc"))
    path = Path(rec["ssh_private_key"])
    assert path == cloud.cloud_dir("a10") / "ssh_key" and "ssh_private_key_content" not in rec
    assert path.read_text() == "-----BEGIN KEY-----\nabc\n" and path.stat().st_mode & 0o077 == 0
    assert cloud.keep_private_key("a10", _record()) == _record()


def _cloud_cluster(name: str = "a10") -> None:
    kh = cloud.cloud_dir(name) / "known_hosts"
    add_cluster(name, cloud.hosts_from_record(_record(name=name), kh))
    cloud._save_meta(name, {"spec": cloud.CloudSpec(gpus="A10G:1", infra="aws").to_request(), "cloud": "AWS",
                            "accelerators": "A10G:1", "hourly_price": 1.006, "autostop_minutes": 30})


def _run_on(runs_root: Path, cluster: str, state: RunState, **remote) -> Run:
    run = Run.create(runs_root, "r", "causal_lm", "{}\n", ["clustertune", "run"], backend="ssh")
    run.set_remote({"cluster": cluster, "nodes": [0], **remote})
    if state is not RunState.CREATED:
        run.start_attempt(job_id="k@h:1")
        if state is not RunState.RUNNING:
            run.transition(state)
    return run


def test_up_refuses_other_resources_before_asking_skypilot(ct_config: Path, no_sky: Path):
    _cloud_cluster()
    with pytest.raises(cloud.CloudError, match=r"other resources: gpus: 'A10G:1' \(existing\) vs 'H100:8'"):
        clusters.up("a10", cloud.CloudSpec(gpus="H100:8", infra="aws"), None)
    add_cluster("mine", [HostSpec.parse("h1")])
    with pytest.raises(cloud.CloudError, match="already one of your SSH clusters"):
        clusters.up("mine", cloud.CloudSpec(gpus="A10G:1"), None)
    assert [h.address for h in get_cluster("mine").hosts] == ["h1"]
    # The same resources go on to SkyPilot (here: not installed, which says what to do).
    with pytest.raises(sky_env.SkyEnvMissing, match="cloud setup"):
        clusters.up("a10", cloud.CloudSpec(gpus="A10G:1", infra="aws"), None)


def test_down_refuses_while_runs_are_active_or_keep_results_there(ct_config: Path, runs_root: Path, no_sky: Path):
    _cloud_cluster()
    active = _run_on(runs_root, "a10", RunState.RUNNING)
    kept = _run_on(runs_root, "a10", RunState.COMPLETED, keep_on_cluster=True)
    _run_on(runs_root, "a10", RunState.COMPLETED, keep_on_cluster=False, gathered=True)
    _run_on(runs_root, "other", RunState.RUNNING)
    with pytest.raises(cloud.CloudError) as info:
        clusters.down("a10")
    text = str(info.value)
    assert f"{active.id} (RUNNING" in text and f"{kept.id} (its results are kept on the cluster" in text
    assert text.count("\n  ") == 2 and "--force" in text
    assert get_cluster("a10").hosts  # nothing was forgotten
    # --force goes past the guard to SkyPilot (not installed here: the error says so).
    with pytest.raises(sky_env.SkyEnvMissing):
        clusters.down("a10", force=True)
    with pytest.raises(cloud.CloudError, match="not a cloud cluster"):
        add_cluster("mine", [HostSpec.parse("h1")])
        clusters.down("mine")


def test_runs_on_a_lost_cloud_cluster_end_preempted(ct_config: Path, runs_root: Path):
    _cloud_cluster()
    running = _run_on(runs_root, "a10", RunState.RUNNING)
    done = _run_on(runs_root, "a10", RunState.COMPLETED)
    assert clusters.mark_preempted("a10", "UP") == []
    assert clusters.mark_preempted("a10", "STOPPED") == [running.id]
    again = Run.load(running.paths.root)
    assert again.state is RunState.PREEMPTED and f"--resume {running.id}" in (again.info.reason or "")
    assert Run.load(done.paths.root).state is RunState.COMPLETED
    assert clusters.mark_preempted("a10", None) == []  # already ended: marked once


def test_cli_exit_codes(ct_config: Path, no_sky: Path, runs_root: Path):
    env = {"CLUSTERTUNE_CONFIG_DIR": str(ct_config), sky_env.VENVS_ENV: str(no_sky)}
    bad = cli("cluster", "up", "a10", "--gpus", "A10G x", env=env)
    assert bad.returncode == 2 and "--gpus" in bad.stderr
    missing = cli("cluster", "up", "a10", "--gpus", "A10G:1", "--autostop", "30m", env=env)
    assert missing.returncode == 2 and "clustertune cloud setup" in missing.stderr
    _cloud_cluster()
    _run_on(runs_root, "a10", RunState.RUNNING)
    down = cli("cluster", "down", "a10", env={**env, "CLUSTERTUNE_RUNS": str(runs_root)})
    assert down.returncode == 2 and "still running there" in down.stderr
    ls = cli("cluster", "ls", env=env)
    assert ls.returncode == 0 and "AWS" in ls.stdout and "$1.01/h" in ls.stdout and "30m" in ls.stdout


def test_environment_is_built_once_per_requirements_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("# nothing to install: the venv, the pip run and the cache are what is checked\n")
    monkeypatch.setattr(sky_env, "REQUIREMENTS", reqs)
    monkeypatch.delenv(sky_env.PYTHON_ENV, raising=False)
    monkeypatch.setenv(sky_env.VENVS_ENV, str(tmp_path / "venvs"))
    (sky_env.venv_dir() / "bin").mkdir(parents=True)  # a half-built one from an interrupted setup
    python = sky_env.setup()
    assert python == tmp_path / "venvs" / sky_env.requirements_hash() / "bin" / "python"
    out = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    assert out.stdout.strip() == str(sky_env.venv_dir())
    ready = sky_env.venv_dir() / ".clustertune-ready"
    stamp = ready.stat().st_mtime_ns
    assert sky_env.setup() == python and ready.stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert sky_env.sky_python() == python
    reqs.write_text("# another pin\n")  # a changed requirements file asks for a new environment
    with pytest.raises(sky_env.SkyEnvMissing, match="cloud setup"):
        sky_env.sky_python()


def test_new_addresses_after_a_restart_reach_the_cluster_and_its_runs(ct_config: Path, runs_root: Path, tmp_path: Path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hk")], check=True)
    pub = (tmp_path / "hk.pub").read_text().strip()
    spec = cloud.CloudSpec(gpus="A10G:1")
    first = _record()
    clusters.register("a10", spec, first, [{"address": n["address"], "port": n["port"], "keys": [pub]} for n in first["nodes"]])
    kept = _run_on(runs_root, "a10", RunState.COMPLETED, keep_on_cluster=True,
                   hosts=[h.to_dict() for h in get_cluster("a10").hosts])
    other = _run_on(runs_root, "other", RunState.COMPLETED, hosts=[{"address": "9.9.9.9"}])
    moved = _record(nodes=[{"address": "5.6.7.8", "port": 22}, {"address": "5.6.7.9", "port": 22}])
    clusters.register("a10", spec, moved, [{"address": n["address"], "port": n["port"], "keys": [pub]} for n in moved["nodes"]])
    assert [h.address for h in get_cluster("a10").hosts] == ["5.6.7.8", "5.6.7.9"]
    assert [h["address"] for h in Run.load(kept.paths.root).info.remote["hosts"]] == ["5.6.7.8", "5.6.7.9"]
    assert Run.load(other.paths.root).info.remote["hosts"] == [{"address": "9.9.9.9"}]
    pinned = (cloud.cloud_dir("a10") / "known_hosts").read_text()
    assert "5.6.7.8 ssh-ed25519" in pinned and "3.4.5.6" not in pinned  # the old addresses' pins are gone
