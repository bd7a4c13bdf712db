"""Latency of a warm remote call vs plain `ssh host true`, over the same multiplexed connection.

    python benchmarks/remote_call.py                 # a throwaway sshd on 127.0.0.1
    python benchmarks/remote_call.py --cluster NAME  # host 0 of a configured cluster

Runs both side by side (interleaved, median of --repeat each) and prints the ratio; also the
time to confirm that an unchanged env exists (a fresh handle, nothing cached in the process).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _small(x):
    return x + 1


def _loopback_cluster(tmp: Path) -> tuple[str, int]:
    """A cluster of one throwaway sshd on 127.0.0.1: its name, and the sshd's pid to stop."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import getpass

    from tests.services.sshd import _start_one

    from clustertune.remote.config import HostSpec, add_cluster

    os.environ["CLUSTERTUNE_CONFIG_DIR"] = str(tmp / "config")
    os.environ["CLUSTERTUNE_RUNS"] = str(tmp / "runs")
    key = tmp / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    auth = tmp / "authorized_keys"
    auth.write_text(key.with_suffix(".pub").read_text())
    host = _start_one(tmp, "bench", getpass.getuser(), auth, use_pam=False)
    kt, kb = host.host_key_pub.read_text().split()[:2]
    (tmp / "known_hosts").write_text(f"[127.0.0.1]:{host.port} {kt} {kb}\n")
    add_cluster("bench", [HostSpec(address="127.0.0.1", port=host.port, user=getpass.getuser(), key=str(key),
                                   root=str(host.root), known_hosts=str(tmp / "known_hosts"))])
    return "bench", host.pid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    args = ap.parse_args()
    if args.smoke:
        args.repeat = 2
    with tempfile.TemporaryDirectory(prefix="ctb") as tmp:
        name, sshd_pid = (args.cluster, 0) if args.cluster else _loopback_cluster(Path(tmp))
        try:
            _measure(name, args)
        finally:
            if sshd_pid:  # the throwaway sshd goes with its folder
                os.kill(sshd_pid, signal.SIGTERM)


def _measure(name: str, args: argparse.Namespace) -> None:
    import clustertune as ct
    from clustertune.remote.envs import Env

    c = ct.cluster(name)
    conn = c.conn(0)
    f = ct.function(_small).to(c, env=Env())
    f(0)  # cold: helper copied, env built, master connection opened
    ssh_true = conn.ssh_argv("true")
    subprocess.run(ssh_true, check=True)
    calls, sshs = [], []
    for i in range(args.repeat):
        t = time.perf_counter()
        assert f(i) == i + 1
        calls.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(ssh_true, check=True)
        sshs.append(time.perf_counter() - t)
    reuse = []
    for _ in range(1 if args.smoke else 5):
        fresh = ct.cluster(name)
        t = time.perf_counter()
        fresh.ensure_env(0, Env(), stream=False)
        reuse.append(time.perf_counter() - t)
    mc, ms = statistics.median(calls), statistics.median(sshs)
    print(f"warm ct.function call : median {mc * 1000:.0f} ms over {args.repeat}")
    print(f"ssh host true (muxed) : median {ms * 1000:.0f} ms over {args.repeat}")
    print(f"ratio call / ssh true : {mc / ms:.2f}x (goal <= 1.5x)")
    print(f"unchanged env reuse   : median {statistics.median(reuse) * 1000:.0f} ms (goal < 1000 ms)")
    if not args.cluster:
        c.down()
    print(f"ratio={mc / ms:.2f}")  # a warm call's time over a muxed `ssh host true`


if __name__ == "__main__":
    main()
