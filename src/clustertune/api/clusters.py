"""Clusters through the one door: what ``cluster add|ls|up|check|down|gc|rm``, ``sync``, ``exec``
and ``cloud setup`` call. SSH clusters are the host layer's (:mod:`clustertune.remote`), cloud
clusters SkyPilot's through it, remote commands the calls layer's (:mod:`clustertune.calls`)."""

from __future__ import annotations

from clustertune.calls.clusters import down as down_cloud, up
from clustertune.calls.functions import remote_exec
from clustertune.remote import sky_env
from clustertune.remote.cloud import CloudSpec, bridge, cloud_clusters, load_meta, parse_autostop
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import HostSpec, add_cluster, clusters_file, list_clusters, remove_cluster
from clustertune.remote.envs import Env


def is_cloud(name: str) -> bool:
    """Whether ``name`` is a cloud cluster this machine started (``cluster up``), not an SSH one."""
    return load_meta(name) is not None


__all__ = ["Cluster", "CloudSpec", "Env", "HostSpec", "add_cluster", "bridge", "cloud_clusters", "clusters_file",
           "down_cloud", "is_cloud", "list_clusters", "parse_autostop", "remote_exec", "remove_cluster", "sky_env",
           "up"]
