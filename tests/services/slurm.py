"""A real SLURM cluster on loopback for the test session: munged, slurmctld and two slurmd
("n1", "n2", several node daemons on one host), configuration and state in a temporary
directory, ports chosen free. Started once per session, on first use.

Needs Debian's packages (``bash scripts/ci/install_slurm.sh`` as root) and root (SlurmUser=root).
Without them the tests that use it skip, unless CLUSTERTUNE_REQUIRE_SERVICES=1 (CI), where a
missing cluster is a failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ENABLE_HINT = "install SLURM with `sudo bash scripts/ci/install_slurm.sh` and run the tests as root"
NODES = ("n1", "n2")
GPU_TYPE = "a100"
GPUS_PER_NODE = 4


def _missing_service(why: str) -> None:
    if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"SLURM test cluster unavailable: {why} (CLUSTERTUNE_REQUIRE_SERVICES=1)")
    pytest.skip(f"SLURM test cluster unavailable: {why}; to run these tests, {ENABLE_HINT}")


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class SlurmCluster:
    root: Path
    conf: Path

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    def daemon_logs(self) -> str:
        out = []
        for p in sorted(self.log_dir.glob("*.log")):
            out.append(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(out)


def _write_conf(root: Path, ctl_port: int, node_ports: list[int]) -> Path:
    sock = root / "munge" / "munge.socket"
    conf = root / "slurm.conf"
    lo, hi = node_ports[0], node_ports[0] + len(NODES) - 1
    conf.write_text("\n".join([
        f"ClusterName=ct{secrets.token_hex(3)}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctl_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # cred_expire=10 shortens the requeue delay from ~2 minutes to seconds.
        f"AuthInfo=socket={sock},cred_expire=10",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerParameters=sched_interval=2,bf_interval=2",
        "MpiDefault=none",
        "ReturnToService=2",
        "JobRequeue=1",
        "MinJobAge=600",
        # A site's limit on job arrays (indices 0-39), small so a sweep can exceed it in a test.
        "MaxArraySize=40",
        "KillWait=10",
        # The machine has 2 cores; let each node offer 4 so concurrent test jobs do not queue.
        "SlurmdParameters=config_overrides",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={root}/log/jobcomp.txt",
        # Each node's own job directory in SLURM_TMPDIR, set for every task as sites set it
        # (see _write_task_prolog): both loopback nodes share one disk, so the name tells them apart.
        f"TaskProlog={_write_task_prolog(root)}",
        # Fake GPUs (see _write_gres_conf): SLURM itself accepts or refuses GPU requests.
        "GresTypes=gpu",
        f"NodeName=n[1-{len(NODES)}] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{lo}-{hi}] CPUs=4 RealMemory=4000 TmpDisk=2000 "
        f"Gres=gpu:{GPU_TYPE}:{GPUS_PER_NODE} State=UNKNOWN",
        f"PartitionName=debug Nodes=n[1-{len(NODES)}] Default=YES MaxTime=INFINITE State=UP",
    ]) + "\n")
    _write_gres_conf(root)
    return conf


def _write_task_prolog(root: Path) -> Path:
    """A TaskProlog: slurmstepd runs it before each task and sets the ``export`` lines it prints."""
    script = root / "task_prolog.sh"
    script.write_text("#!/bin/sh\n"
                      f'dir="{root}/node-tmp/$SLURMD_NODENAME/$SLURM_JOB_ID"\n'
                      'mkdir -p "$dir"\n'
                      'echo "export SLURM_TMPDIR=$dir"\n')
    script.chmod(0o755)
    return script


def _write_gres_conf(root: Path) -> None:
    """gres.conf beside slurm.conf: typed GPUs with placeholder device files and no detection
    (no real GPU here). Jobs get SLURM_GPUS_ON_NODE; CUDA_VISIBLE_DEVICES stays empty."""
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(GPUS_PER_NODE):
        (dev / f"gpu{i}").touch()
    (root / "gres.conf").write_text(
        "AutoDetect=off\n"
        f"NodeName=n[1-{len(NODES)}] Name=gpu Type={GPU_TYPE} File={dev}/gpu[0-{GPUS_PER_NODE - 1}]\n")


def _consecutive_free_ports(n: int) -> list[int]:
    for _ in range(50):
        base = _free_ports(1)[0]
        if base + n > 65000:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return list(range(base, base + n))
    raise RuntimeError("no run of free ports found")


def _start(root: Path) -> SlurmCluster:
    for d in ("munge", "state", "spool", "log"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o755)  # munged insists that others can reach its socket
    key = root / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    run = lambda argv: subprocess.run(argv, capture_output=True, text=True, timeout=60)  # noqa: E731
    m = run(["munged", "--force", f"--key-file={key}", f"--socket={root}/munge/munge.socket",
             f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/log/munged.log",
             f"--seed-file={root}/munge/munge.seed"])
    if m.returncode != 0:
        raise RuntimeError(f"munged failed: {m.stderr}")
    ctl_port = _free_ports(1)[0]
    node_ports = _consecutive_free_ports(len(NODES))
    conf = _write_conf(root, ctl_port, node_ports)
    os.environ["SLURM_CONF"] = str(conf)
    c = run(["slurmctld", "-f", str(conf)])
    if c.returncode != 0:
        raise RuntimeError(f"slurmctld failed: {c.stderr}")
    for node in NODES:
        d = run(["slurmd", "-f", str(conf), "-N", node])
        if d.returncode != 0:
            raise RuntimeError(f"slurmd -N {node} failed: {d.stderr}")
    cluster = SlurmCluster(root, conf)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = run(["sinfo", "-h", "-N", "-o", "%N %t"])
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        if out.returncode == 0 and all(states.get(n) == "idle" for n in NODES):
            return cluster
        time.sleep(0.5)
    raise RuntimeError(f"nodes not idle after 60 s: {out.stdout} {out.stderr}\n{cluster.daemon_logs()}")


def _stop(root: Path) -> None:
    subprocess.run(["scancel", "--full", "--user=root"], capture_output=True, timeout=30)
    pids = []
    for pid_file in [*root.glob("slurmd-*.pid"), root / "slurmctld.pid", root / "munge" / "munged.pid"]:
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)  # all at once: each daemon takes ~2 s to stop
            pids.append(pid)
        except (OSError, ValueError):
            continue
    deadline = time.monotonic() + 15
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol") if shutil.which(b) is None]
    if missing:
        _missing_service(f"{', '.join(missing)} not found")
    if os.geteuid() != 0:
        _missing_service("the test cluster runs its daemons as root")
    old_conf = os.environ.get("SLURM_CONF")
    root = Path(tempfile.mkdtemp(prefix="ct-slurm-"))
    try:
        cluster = _start(root)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        _stop(root)
        _missing_service(f"it did not start: {exc}")
    try:
        yield cluster
    finally:
        _stop(root)
        if old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_conf
        shutil.rmtree(root, ignore_errors=True)
