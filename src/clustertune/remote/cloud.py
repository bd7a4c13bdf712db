"""Clusters started on a cloud through SkyPilot, registered as ordinary SSH clusters.

SkyPilot provisions (``cluster up``), reports (``cluster ls``) and tears down (``cluster
down``); everything in between is clustertune's SSH path. SkyPilot runs in its own Python
(:mod:`sky_env`) behind a JSON bridge (:mod:`sky_bridge`), never in this process.

Host keys: SkyPilot connects with host-key checking off and never reports host keys. At
``up`` the keys are read over SkyPilot's own SSH connection, pinned in the cluster's own
known_hosts and their fingerprints printed: trust on first use. From then on clustertune
checks them strictly, as for any cluster.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from clustertune.errors import ClusterError
from clustertune.fsutil import atomic_write_text
from clustertune.remote import sky_env
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import HostSpec, add_cluster, check_name, config_dir, list_clusters, remove_cluster
from clustertune.remote.transport import shell_join

BRIDGE = Path(__file__).with_name("sky_bridge.py")
HOST_KEY_FILES = "/etc/ssh/ssh_host_*_key.pub"
HOLD_MAX_S = 14 * 86400  # a hold never outlives two weeks, whatever happens to the run


class CloudError(ClusterError):
    """SkyPilot refused or failed; the message says how to fix it."""

    def __init__(self, message: str, kind: str = "other"):
        super().__init__(message)
        self.kind = kind


_FIXES = {
    "no_cloud": "no cloud is enabled for SkyPilot: run `{sky} check` (in SkyPilot's environment) and set up "
                "the credentials it asks for",
    "capacity": "no capacity or quota for these GPUs there: try another region or cloud (--infra), fewer GPUs, "
                "on-demand instead of --spot, or ask the cloud for a higher GPU quota",
    "invalid": "SkyPilot rejected the request: check --gpus (NAME:COUNT, e.g. A10G:1) and --infra (e.g. aws, "
               "gcp/us-central1)",
    "not_found": "SkyPilot has no such cluster (any more): `clustertune cluster up` starts it again",
}


# -- what was asked for -----------------------------------------------------------------------


@dataclass(frozen=True)
class CloudSpec:
    """The resources a cloud cluster was started with (compared on a second ``up``)."""

    gpus: str
    infra: str | None = None
    nodes: int = 1
    spot: bool = False

    def __post_init__(self) -> None:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(:[0-9]+(\.[0-9]+)?)?$", self.gpus or ""):
            raise ClusterError(f"--gpus {self.gpus!r} is not NAME[:COUNT] (e.g. A10G:1, H100:8)")
        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise ClusterError(f"--nodes {self.nodes!r} must be a whole number of at least 1")

    def differences(self, other: CloudSpec) -> list[str]:
        return [f"{f.name}: {getattr(self, f.name)!r} (existing) vs {getattr(other, f.name)!r} (asked)"
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    def to_request(self) -> dict[str, Any]:
        return asdict(self)


def parse_autostop(text: str | None) -> int | None:
    """``30m``, ``2h``, ``90`` (minutes) -> minutes; ``off``/None -> None."""
    if text is None or text.strip().lower() in ("", "off", "none", "no"):
        return None
    m = re.fullmatch(r"\s*([0-9]+)\s*([mh]?)\s*", text.lower())
    if not m or int(m.group(1)) == 0:
        raise ClusterError(f"--autostop {text!r} is not a duration: write minutes or hours, e.g. 30m, 2h (or off)")
    return int(m.group(1)) * (60 if m.group(2) == "h" else 1)


# -- the bridge -------------------------------------------------------------------------------


def bridge(request: dict[str, Any], python: Path | None = None, timeout: float | None = None,
           on_stderr: Callable[[str], None] | None = None) -> Any:
    """Send one request to SkyPilot through the bridge script; its result, or a CloudError."""
    exe = python or sky_env.sky_python()
    proc = subprocess.Popen([str(exe), str(BRIDGE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    err_lines = []
    for line in proc.stderr:  # SkyPilot's progress, as it comes
        err_lines.append(line)
        if on_stderr is not None:
            on_stderr(line)
    out = proc.stdout.read()
    proc.wait(timeout=timeout)
    try:
        answer = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise CloudError(f"SkyPilot's bridge ({exe}) gave no answer (exit {proc.returncode}):\n"
                         f"{''.join(err_lines)[-2000:]}\nIf SkyPilot's environment is damaged, remove "
                         f"{sky_env.venv_dir()} and run `clustertune cloud setup` again") from None
    if not answer.get("ok"):
        raise cloud_error(answer["error"], exe)
    return answer["result"]


def cloud_error(err: dict[str, Any], python: Path) -> CloudError:
    fix = _FIXES.get(err.get("kind", ""), "").format(sky=shlex.quote(str(Path(python).with_name("sky"))))
    text = f"SkyPilot: {err.get('type')}: {err.get('message', '').strip()[-2000:]}"
    return CloudError(f"{text}\n{fix}" if fix else text, kind=err.get("kind", "other"))


# -- status records -> SSH cluster ------------------------------------------------------------


def hosts_from_record(record: dict[str, Any], known_hosts: Path) -> list[HostSpec]:
    """The SSH hosts of a cluster SkyPilot reports (a :func:`sky_bridge.cluster_record`)."""
    name = record.get("name")
    if record.get("status") != "UP":
        raise CloudError(f"cloud cluster {name!r} is {record.get('status')}, not UP; "
                         f"`clustertune cluster up {name} ...` starts it again")
    if not record.get("nodes") or not record.get("ssh_user"):
        raise CloudError(f"SkyPilot reports no SSH address or user for {name!r} (a Kubernetes or Slurm "
                         "cluster is not reached over plain SSH); clustertune needs SSH-reachable VMs")
    if record.get("ssh_proxy_command"):
        raise CloudError(f"cloud cluster {name!r} is reached through a proxy command, which clustertune "
                         "does not take over; use a cloud whose VMs have public SSH addresses")
    key = record.get("ssh_private_key")
    return [HostSpec(address=n["address"], port=int(n["port"]), user=record["ssh_user"],
                     key=str(Path(key).expanduser()) if key else None, known_hosts=str(known_hosts))
            for n in record["nodes"]]


def keep_private_key(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """The record with its SSH key in the cluster's own file (mode 0600) when SkyPilot's API
    server sent the key itself; its path stays valid only where the server runs."""
    content = record.get("ssh_private_key_content")
    if not content:
        return record
    path = cloud_dir(name) / "ssh_key"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(path, content if content.endswith("\n") else content + "\n", mode=0o600)
    return {**{k: v for k, v in record.items() if k != "ssh_private_key_content"}, "ssh_private_key": str(path)}


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def fingerprint(key_line: str) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` prints it, from a public key line."""
    blob = base64.b64decode(key_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def pin_host_keys(found: list[dict[str, Any]], path: Path) -> list[str]:
    """Write the hosts' keys as the only entries of ``path``; lines to print (fingerprints)."""
    lines, shown = [], []
    for h in found:
        if not h["keys"]:
            raise CloudError(f"{h['address']}:{h['port']}: no host keys found ({HOST_KEY_FILES}); "
                             "cannot pin them, so the cluster is not registered")
        for k in h["keys"]:
            kind, b64 = k.split()[:2]
            lines.append(f"{known_hosts_name(h['address'], h['port'])} {kind} {b64}")
            shown.append(f"{h['address']}:{h['port']} {kind} {fingerprint(k)}")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(path, "\n".join(lines) + "\n", mode=0o600)
    return shown


# -- clustertune's record of its cloud clusters ----------------------------------------------


def cloud_dir(name: str) -> Path:
    return config_dir() / "cloud" / check_name(name)


def _meta_path(name: str) -> Path:
    return cloud_dir(name) / "cloud.yaml"


def load_meta(name: str) -> dict[str, Any] | None:
    path = _meta_path(name)
    if not path.is_file():
        return None
    return yaml.safe_load(path.read_text()) or {}


def cloud_clusters() -> dict[str, dict[str, Any]]:
    root = config_dir() / "cloud"
    out = {}
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        meta = load_meta(d.name)
        if meta is not None:
            out[d.name] = meta
    return out


def _save_meta(name: str, meta: dict[str, Any]) -> None:
    path = _meta_path(name)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(path, yaml.safe_dump(meta, sort_keys=True), mode=0o600)


def register(name: str, spec: CloudSpec, record: dict[str, Any], found_keys: list[dict[str, Any]]) -> list[str]:
    """Pin the hosts' keys and save the cluster as an SSH cluster (replacing its old addresses);
    returns the fingerprint lines to print. (The runs on it follow the new addresses:
    :func:`clustertune.calls.clusters.register`.)"""
    known = cloud_dir(name) / "known_hosts"
    hosts = hosts_from_record(record, known)
    shown = pin_host_keys(found_keys, known)
    add_cluster(name, hosts, replace=True)
    _save_meta(name, {"spec": spec.to_request(), "cloud": record.get("cloud"), "region": record.get("region"),
                      "accelerators": record.get("accelerators"), "hourly_price": record.get("hourly_price"),
                      "autostop_minutes": record.get("autostop_minutes")})
    return shown


def host_key_request(record: dict[str, Any], pattern: str = HOST_KEY_FILES) -> dict[str, Any]:
    return {"op": "host_keys", "pattern": pattern,
            "nodes": [{"address": n["address"], "port": n["port"], "user": record["ssh_user"],
                       "key": record.get("ssh_private_key")} for n in record["nodes"]]}


def up(name: str, spec: CloudSpec, autostop: int | None, on_progress: Callable[[str], None] | None = None,
       seen: Callable[[str | None], None] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Start (or reuse, or restart) the cloud cluster ``name`` and register it; returns
    SkyPilot's record and the pinned host keys' fingerprints. ``seen`` is told the status an
    existing cluster had before it is started again (None: gone)."""
    check_name(name)
    meta = load_meta(name)
    if meta is None and any(c.name == name for c in list_clusters()):
        raise CloudError(f"{name!r} is already one of your SSH clusters (not started on a cloud); "
                         "pick another name for the cloud cluster")
    if meta is not None:
        diff = CloudSpec(**meta["spec"]).differences(spec)
        if diff:
            raise CloudError(f"cloud cluster {name!r} exists with other resources: {'; '.join(diff)}. "
                             f"Use it as it is, or `clustertune cluster down {name}` first, or pick another name")
        records = bridge({"op": "status", "cluster": name, "refresh": True})
        if seen is not None:
            seen(records[0]["status"] if records else None)
    bridge({"op": "validate", "spec": spec.to_request()})  # SkyPilot's own checks, before anything is paid for
    (record,) = bridge({"op": "launch", "cluster": name, "spec": spec.to_request(), "autostop_minutes": autostop},
                       on_stderr=on_progress)
    record = keep_private_key(name, record)
    found = bridge(host_key_request(record))
    return record, register(name, spec, record, found)


def require_cloud_cluster(name: str) -> None:
    if load_meta(name) is None:
        raise CloudError(f"{name!r} is not a cloud cluster started by `clustertune cluster up`; "
                         f"`clustertune cluster down {name}` only stops clustertune's runs on SSH clusters")


def down(name: str, on_progress: Callable[[str], None] | None = None) -> None:
    """Tear the cloud cluster down (SkyPilot deletes the machines and their disks) and forget it.
    (What must not be lost with it is checked first: :func:`clustertune.calls.clusters.down`.)"""
    require_cloud_cluster(name)
    try:
        bridge({"op": "down", "cluster": name}, on_stderr=on_progress)
    except CloudError as exc:
        if exc.kind != "not_found":  # already gone on the cloud's side: forget it here too
            raise
    forget(name)


def forget(name: str) -> None:
    import shutil

    try:
        remove_cluster(name)
    except ClusterError:
        pass  # removed by hand already
    shutil.rmtree(cloud_dir(name), ignore_errors=True)


# -- autostop ---------------------------------------------------------------------------------


def hold_command(cluster: Cluster, i: int, key: str) -> str:
    """A shell line that returns once run ``key`` on host ``i`` is over: the host helper's
    ``result`` waits for it (a killed run counts as over). Run from the login directory,
    which the cluster's relative roots are under."""
    waiter = [cluster.hosts[i].python, cluster.runner_path(i), "result", cluster.root(i), key,
              "--timeout", str(HOLD_MAX_S)]
    return shell_join(["cd"], "&&", waiter, ">/dev/null 2>&1;", ["true"])


def hold_autostop(cluster: Cluster, key: str, run_id: str, dryrun: bool = False) -> dict[str, Any] | None:
    """While run ``key`` runs on the first host of a cloud cluster with autostop, a SkyPilot
    job waits for it there, so SkyPilot does not stop the machines under the run. Nothing
    for other clusters. A failure is printed, and the run goes on without the hold."""
    meta = load_meta(cluster.name)
    if meta is None or not (meta.get("autostop_minutes") or 0) > 0:
        return None
    request = {"op": "hold", "cluster": cluster.name, "name": f"clustertune-{run_id}",
               "run": hold_command(cluster, 0, key), "dryrun": dryrun}
    try:
        return bridge(request)
    except ClusterError as exc:
        import sys

        print(f"clustertune: warning: run {run_id} does not hold off the autostop of {cluster.name} "
              f"({meta['autostop_minutes']} min idle): {exc}", file=sys.stderr)
        return None
