"""ssh's failures (and a cluster's other refusals) turned into messages whose commands can be
run as printed: they name the host's cluster, not a placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustertune.errors import ClusterError, HostKeyError
from clustertune.remote.cluster import Cluster
from clustertune.remote.config import ClusterSpec, HostSpec
from clustertune.remote.transport import raise_ssh_failure

HOST = HostSpec(address="gpu1", port=2222, user="me")


def test_an_unknown_host_key_names_the_cluster_to_check() -> None:
    conn = Cluster(ClusterSpec("lab-2", (HOST,))).conn(0)
    with pytest.raises(HostKeyError) as err:
        conn._ssh_failure("Host key verification failed.\n")  # what ssh says, through the cluster's connection
    msg = str(err.value)
    assert "`clustertune cluster check lab-2 --accept-new-host-keys`" in msg and "NAME" not in msg
    assert "ssh-keyscan -p 2222 gpu1" in msg


def test_failed_authentication_names_the_cluster_to_fix() -> None:
    with pytest.raises(ClusterError) as err:
        raise_ssh_failure(HOST, "me@gpu1: Permission denied (publickey).", "lab-2")
    assert "`clustertune cluster add lab-2 HOST... --user U --key FILE`" in str(err.value)
    assert "NAME" not in str(err.value)


def test_without_the_cluster_the_placeholder_says_what_it_stands_for() -> None:
    with pytest.raises(HostKeyError) as err:
        raise_ssh_failure(HOST, "Host key verification failed.")
    msg = str(err.value)
    assert "`clustertune cluster check CLUSTER --accept-new-host-keys` (CLUSTER: the name of the cluster holding me@gpu1:2222)" in msg


def test_sync_and_exec_refusals_name_the_cluster(tmp_path: Path) -> None:
    from clustertune.calls.functions import remote_exec

    cluster = Cluster(ClusterSpec("lab-2", (HOST,)))
    with pytest.raises(ClusterError, match="`clustertune sync lab-2 LOCAL_FOLDER"):
        cluster.sync(tmp_path / "missing")
    with pytest.raises(ClusterError, match="`clustertune exec lab-2 -- CMD ARGS...`"):
        remote_exec(cluster, [])
