"""Run with SkyPilot's Python: status records built the way the installed SkyPilot builds them.

Reads ``{"bridge": PATH, "clusters": [{name, nodes: [[internal, external, port]], user, key,
status, autostop, spot, accelerators}]}`` on stdin. Each cluster becomes a real
``CloudVmRayResourceHandle`` and a ``responses.StatusResponse`` carrying the fields its status
code fills in (nodes, cloud, region, accelerators from the handle's launched resources; the
SSH credentials), goes through the API server's encoder and the client's decoder (the path of
``sky.get(sky.status(...))``), and is mapped by the bridge's ``cluster_record``. Prints the
mapped records as JSON.
"""

import importlib.util
import json
import os
import sys

# This folder holds slurm.py and sshd.py: keep them from standing in for modules SkyPilot imports.
if os.path.realpath(sys.path[0] or ".") == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import sky  # noqa: E402
from sky.backends.cloud_vm_ray_backend import CloudVmRayResourceHandle  # noqa: E402
from sky.schemas.api import responses  # noqa: E402
from sky.server.requests.serializers import decoders, encoders  # noqa: E402
from sky.utils import status_lib  # noqa: E402


def build(c):
    res = sky.Resources(infra="aws/us-east-1", accelerators=c["accelerators"], use_spot=c["spot"])
    nodes = c["nodes"]
    handle = CloudVmRayResourceHandle(
        cluster_name=c["name"], cluster_name_on_cloud=c["name"] + "-2ea4", cluster_yaml=None,
        launched_nodes=len(nodes), launched_resources=res,
        stable_internal_external_ips=[(n[0], n[1]) for n in nodes], stable_ssh_ports=[n[2] for n in nodes])
    lr = handle.launched_resources
    return responses.StatusResponse(
        name=c["name"], launched_at=1700000000, handle=handle, last_use="clustertune cluster up",
        status=status_lib.ClusterStatus(c["status"]), autostop=c["autostop"], to_down=False,
        cluster_hash="0f3c", cluster_ever_up=True, user_hash="ab12cd34", user_name="tester", workspace="default",
        is_managed=False, nodes=handle.launched_nodes,
        cloud=f"{lr.cloud}" if lr.cloud else None, region=f"{lr.region}" if lr.region else None,
        accelerators=f"{lr.accelerators}" if lr.accelerators else None,
        credentials={"ssh_user": c["user"], "ssh_private_key": c["key"], "ssh_control_name": c["name"],
                     "ssh_proxy_command": None, "ssh_private_key_content": c.get("key_content")})


req = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("sky_bridge", req["bridge"])
bridge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bridge)
wire = json.loads(json.dumps(encoders.encode_status([build(c) for c in req["clusters"]])))
print(json.dumps([bridge.cluster_record(r) for r in decoders.decode_status(wire)]))
