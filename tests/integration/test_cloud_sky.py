"""The bridge against the real, installed SkyPilot (in its own venv), and host-key pinning
through SkyPilot's own SSH command runner against the loopback sshd hosts.

No cloud is reached: SkyPilot's Task/Resources validation runs locally, status records are
built with SkyPilot's own classes and sent through its API encoder and client decoder, and
the "cloud" hosts are the two loopback sshd servers.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from clustertune.errors import HostKeyError
from clustertune.calls import clusters
from clustertune.remote import cloud
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import get_cluster
from tests.services.sshd import SshdService

RECORDS = Path(__file__).parents[1] / "services" / "sky_records.py"


def test_bridge_builds_real_tasks_and_reports_skypilots_errors(sky_python: Path):
    assert cloud.bridge({"op": "version"}, python=sky_python)["version"] == "0.14.1"
    spec = cloud.CloudSpec(gpus="A10G:1", infra="aws", nodes=2, spot=True)
    task = cloud.bridge({"op": "validate", "spec": spec.to_request()}, python=sky_python)
    assert task["cloud"] == "AWS" and task["accelerators"] == {"A10G": 1}
    assert task["use_spot"] is True and task["nodes"] == 2
    # SkyPilot's own validation, surfaced with the fix.
    with pytest.raises(cloud.CloudError, match=r"(?s)ValueError: Cloud 'nocloud' is not a valid cloud.*--infra"):
        cloud.bridge({"op": "validate", "spec": {**spec.to_request(), "infra": "nocloud"}}, python=sky_python)
    with pytest.raises(cloud.CloudError, match=r"(?s)should be <name> or <name>:<cnt>.*--gpus"):
        cloud.bridge({"op": "validate", "spec": {**spec.to_request(), "gpus": "A10G:x"}}, python=sky_python)
    with pytest.raises(cloud.CloudError, match="unknown bridge op"):
        cloud.bridge({"op": "teleport"}, python=sky_python)


def _records(sky_python: Path, clusters: list[dict]) -> list[dict]:
    req = {"bridge": str(cloud.BRIDGE), "clusters": clusters}
    out = subprocess.run([str(sky_python), str(RECORDS)], input=json.dumps(req), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_status_record_becomes_a_pinned_ssh_cluster(sky_python: Path, sshd_service: SshdService, ct_config: Path):
    svc = sshd_service
    (record,) = _records(sky_python, [{
        "name": "a10", "status": "UP", "autostop": 30, "spot": True, "accelerators": "A10G:1",
        "user": svc.user, "key": "~/.sky/clients/0f3c/ssh/sky-key",
        "key_content": svc.client_key.read_text(),
        "nodes": [["10.0.0.5", h.address, h.port] for h in svc.hosts]}])
    assert record["cloud"] == "AWS" and record["region"] == "us-east-1" and record["accelerators"] == "A10G:1"
    assert record["use_spot"] is True and record["autostop_minutes"] == 30 and record["nodes_count"] == 2
    assert [(n["address"], n["port"], n["internal_address"]) for n in record["nodes"]] == \
        [(h.address, h.port, "10.0.0.5") for h in svc.hosts]
    record = cloud.keep_private_key("a10", record)
    # Read the host keys through SkyPilot's SSH command runner (checking off), pin them.
    pattern = " ".join(shlex.quote(str(h.host_key_pub)) for h in svc.hosts[:1])
    found = cloud.bridge(cloud.host_key_request(record, pattern), python=sky_python)
    assert [f["keys"] for f in found] == [[svc.hosts[0].host_key_pub.read_text().strip()]] * 2
    shown = clusters.register("a10", cloud.CloudSpec(gpus="A10G:1", infra="aws", spot=True), record, found)
    fp = subprocess.run(["ssh-keygen", "-l", "-f", str(svc.hosts[0].host_key_pub)], capture_output=True,
                        text=True, check=True).stdout.split()[1]
    assert shown == [f"{h.address}:{h.port} ssh-ed25519 {fp}" for h in svc.hosts]
    spec = get_cluster("a10")
    assert [h.label for h in spec.hosts] == [f"{svc.user}@{h.address}:{h.port}" for h in svc.hosts]
    assert cloud.load_meta("a10")["autostop_minutes"] == 30
    # host0's pinned key is its real one: strict checking lets clustertune in.
    c = Cluster(spec)
    assert c.conn(0).check_call(["echo", "in"]).text.strip() == "in"
    # host1 presented host0's key at pinning (what a man in the middle would do): refused.
    with pytest.raises(HostKeyError, match="CHANGED"):
        c.conn(1).run(["true"])


def test_a_run_holds_off_autostop_while_it_runs(sky_python: Path, ssh_cluster, monkeypatch: pytest.MonkeyPatch):
    from clustertune.remote import sky_env
    from clustertune.calls.functions import remote_exec

    monkeypatch.setenv(sky_env.PYTHON_ENV, str(sky_python))
    c = Cluster.named("loop")
    assert cloud.hold_autostop(c, "k", "r", dryrun=True) is None  # not a cloud cluster: no hold
    cloud._save_meta("loop", {"spec": cloud.CloudSpec(gpus="A10G:1").to_request(), "autostop_minutes": 30})
    run, _ = remote_exec(c, ["sleep", "120"], hosts=[0], wait=False, stream=False)
    # The SkyPilot job SkyPilot would run on the head node, built by the real SkyPilot.
    task = cloud.hold_autostop(c, run.id, run.id, dryrun=True)
    assert task == {"name": f"clustertune-{run.id}", "run": cloud.hold_command(c, 0, run.id), "nodes": 1}
    # Its command, run on the host: it waits as long as the run runs, and returns when it ends.
    hold = subprocess.Popen(c.conn(0).plain_ssh() + ["--", c.hosts[0].address, task["run"]],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with pytest.raises(subprocess.TimeoutExpired):
        hold.wait(timeout=3)
    c.helper(0, "cancel", run.id)
    assert hold.wait(timeout=120) == 0


def test_skypilots_exceptions_map_to_the_fixes(sky_python: Path):
    probe = f"""
import importlib.util, json
from sky import exceptions as sx
spec = importlib.util.spec_from_file_location("b", {str(cloud.BRIDGE)!r})
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
cases = [sx.NoCloudAccessError("no cloud"), sx.ResourcesUnavailableError("no A10G in us-east-1"),
         sx.ClusterDoesNotExist("a10"), ValueError("bad"), RuntimeError("boom")]
# As the client sees them: raised in the API server, sent over the wire, rebuilt by sky.get.
print(json.dumps([b.classify(sx.deserialize_exception(sx.serialize_exception(e))) for e in cases]))
"""
    out = subprocess.run([str(sky_python), "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == ["no_cloud", "capacity", "not_found", "invalid", "other"]
