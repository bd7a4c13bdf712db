"""The bridge to SkyPilot: run with SkyPilot's own Python, never imported by clustertune.

clustertune starts ``SKY_PYTHON sky_bridge.py`` with one JSON request on stdin, e.g.
``{"op": "status", "cluster": "a10"}``, and reads one JSON answer from stdout:
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"kind", "type", "message"}}``.
Whatever SkyPilot prints goes to stderr (shown to the user as progress). This file imports
only the standard library and ``sky``; nothing of clustertune is importable here, and nothing
of SkyPilot is ever imported into clustertune's process.

SkyPilot's SDK is asynchronous: each call returns a request id, answered by its API server
(started locally on first use); ``sky.get`` / ``sky.stream_and_get`` wait for the answer.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path: clustertune's modules there
# (config.py, backend.py...) must not stand in for modules SkyPilot imports.
if sys.path and os.path.realpath(sys.path[0] or ".") == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import json  # noqa: E402
from typing import Any  # noqa: E402

# Kinds of failure the client turns into a message with the fix.
NO_CLOUD = "no_cloud"
CAPACITY = "capacity"
INVALID = "invalid"
NOT_FOUND = "not_found"
OTHER = "other"


def build_task(spec: dict[str, Any], run: str | None = None, name: str | None = None) -> Any:
    """A real ``sky.Task`` with real ``sky.Resources`` (SkyPilot validates both as it builds
    them). ``spec``: gpus ("A10G:1"), infra ("aws", "gcp/us-central1"...), nodes, spot."""
    import sky

    kwargs: dict[str, Any] = {"accelerators": spec["gpus"], "use_spot": bool(spec.get("spot"))}
    if spec.get("infra"):
        kwargs["infra"] = spec["infra"]
    resources = sky.Resources(**kwargs)
    task = sky.Task(name=name, run=run, num_nodes=int(spec.get("nodes") or 1))
    return task.set_resources(resources)


def describe_task(task: Any) -> dict[str, Any]:
    (res,) = list(task.resources)
    return {"nodes": task.num_nodes, "accelerators": res.accelerators, "use_spot": bool(res.use_spot),
            "cloud": str(res.cloud) if res.cloud is not None else None, "region": res.region,
            "resources": repr(res)}


def cluster_record(resp: Any) -> dict[str, Any]:
    """One ``responses.StatusResponse`` (what ``sky.status`` answers) as plain JSON: the
    addresses and SSH login of each node, and what ``cluster ls`` shows."""
    handle = resp.handle
    creds = resp.credentials or {}
    nodes = []
    if handle is not None and handle.stable_internal_external_ips:
        ports = list(handle.stable_ssh_ports or [])
        for i, (internal, external) in enumerate(handle.stable_internal_external_ips):
            nodes.append({"address": external, "internal_address": internal,
                          "port": int(ports[i]) if i < len(ports) else 22})
    res = handle.launched_resources if handle is not None else None
    return {
        "name": resp.name,
        "status": resp.status.value,
        "cloud": resp.cloud or (str(res.cloud) if res is not None and res.cloud is not None else None),
        "region": resp.region,
        "accelerators": _gpus(res.accelerators) if res is not None and res.accelerators else resp.accelerators,
        "use_spot": bool(res.use_spot) if res is not None else None,
        "nodes_count": resp.nodes,
        "autostop_minutes": resp.autostop,
        "autodown": resp.to_down,
        "hourly_price": _hourly_price(handle),
        "ssh_user": creds.get("ssh_user") or (handle.ssh_user if handle is not None else None),
        "ssh_private_key": creds.get("ssh_private_key"),
        # The API server sends the key itself (it may run elsewhere than this machine).
        "ssh_private_key_content": creds.get("ssh_private_key_content"),
        "ssh_proxy_command": creds.get("ssh_proxy_command"),
        "nodes": nodes,
    }


def _gpus(accelerators: dict[str, Any]) -> str:
    return ",".join(f"{name}:{count:g}" if isinstance(count, float) else f"{name}:{count}"
                    for name, count in accelerators.items())


def _hourly_price(handle: Any) -> float | None:
    if handle is None:
        return None
    try:
        return float(handle.get_hourly_price())
    except Exception:  # noqa: BLE001 - no catalog entry (or no catalog offline): the price is unknown
        return None


def host_keys(nodes: list[dict[str, Any]], pattern: str) -> list[dict[str, Any]]:
    """Each node's public host keys, read through SkyPilot's own SSH command runner (which
    connects with host-key checking off: this is the trust-on-first-use moment)."""
    from sky.utils import command_runner

    out = []
    for n in nodes:
        runner = command_runner.SSHCommandRunner((n["address"], int(n["port"])), n["user"], n.get("key"),
                                                 ssh_control_name=None, ssh_proxy_command=n.get("proxy_command"))
        rc, stdout, stderr = runner.run(f"cat {pattern}", require_outputs=True, stream_logs=False,
                                        separate_stderr=True)
        if rc != 0:
            raise RuntimeError(f"reading the host keys of {n['address']}:{n['port']} failed (exit {rc}): "
                               f"{stderr.strip()[-500:]}")
        out.append({"address": n["address"], "port": int(n["port"]),
                    "keys": [ln.strip() for ln in stdout.splitlines() if ln.strip().startswith(("ssh-", "ecdsa-"))]})
    return out


def _status(cluster: str | None, refresh: bool) -> list[dict[str, Any]]:
    import sky
    from sky.utils import common

    mode = common.StatusRefreshMode.FORCE if refresh else common.StatusRefreshMode.NONE
    rid = sky.status([cluster] if cluster else None, refresh=mode, _include_credentials=True)
    return [cluster_record(r) for r in sky.get(rid)]


def handle(req: dict[str, Any]) -> Any:
    import sky

    op = req.get("op")
    if op == "version":
        return {"version": sky.__version__, "python": sys.executable}
    if op == "validate":
        return describe_task(build_task(req["spec"]))
    if op == "launch":
        task = build_task(req["spec"], name=req["cluster"])
        rid = sky.launch(task, cluster_name=req["cluster"], idle_minutes_to_autostop=req.get("autostop_minutes"),
                         retry_until_up=False)
        sky.stream_and_get(rid)
        return _status(req["cluster"], refresh=False)
    if op == "status":
        return _status(req.get("cluster"), refresh=bool(req.get("refresh")))
    if op == "down":
        return sky.get(sky.down(req["cluster"]))
    if op == "autostop":
        return sky.get(sky.autostop(req["cluster"], int(req["idle_minutes"])))
    if op == "hold":
        # A SkyPilot job that lives as long as a clustertune run: SkyPilot's autostop counts
        # only its own jobs as activity, so this keeps the cluster busy while the run is on it.
        task = sky.Task(name=req["name"], run=req["run"])
        if req.get("dryrun"):
            return {"name": task.name, "run": task.run, "nodes": task.num_nodes}
        job_id, _ = sky.get(sky.exec(task, cluster_name=req["cluster"]))
        return {"job_id": job_id}
    if op == "host_keys":
        return host_keys(req["nodes"], req.get("pattern") or "/etc/ssh/ssh_host_*_key.pub")
    raise ValueError(f"unknown bridge op {op!r}")


def classify(exc: BaseException) -> str:
    try:
        from sky import exceptions as sx
    except ImportError:
        return OTHER
    if isinstance(exc, (sx.NoCloudAccessError, sx.CloudUserIdentityError, sx.InvalidCloudCredentials)):
        return NO_CLOUD
    if isinstance(exc, sx.ResourcesUnavailableError):
        return CAPACITY
    if isinstance(exc, (sx.ClusterDoesNotExist, sx.ClusterNotUpError)):
        return NOT_FOUND
    if isinstance(exc, (ValueError, KeyError, TypeError)):
        return INVALID
    return OTHER


def main() -> int:
    # Keep stdout for the answer alone: SkyPilot (and anything it runs) prints to fd 1 too.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        req = json.loads(sys.stdin.read())
        answer: dict[str, Any] = {"ok": True, "result": handle(req)}
    except BaseException as exc:  # noqa: BLE001 - every failure travels back as JSON
        answer = {"ok": False, "error": {"kind": classify(exc), "type": type(exc).__name__,
                                         "module": type(exc).__module__, "message": str(exc)}}
    with os.fdopen(answer_fd, "w") as out:
        out.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
