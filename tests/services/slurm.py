"""A real SLURM cluster on loopback for the test session: munged, slurmctld and three slurmd
(several node daemons on one host): "n1" and "n2" in the default partition, "n3" alone in a
short one whose GPUs and environment differ; configuration and state in a temporary directory,
ports chosen free. Started once per session, on first use.

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
NODES = ("n1", "n2")  # the default partition, "debug": no time limit
GPU_TYPE = "a100"
GPUS_PER_NODE = 4
# A second partition of one node whose GPUs, limits and environment differ, so each check of
# `validate --on slurm` has a failing case on the real controller: typed GPUs no other node has
# (24 GB, as its fake nvidia-smi says), a 30-minute MaxTime, one node at most, and another torch
# on its Python's path (a distribution record only: the ranks' imports are unchanged).
SHORT = "short"
SHORT_NODE = "n3"
SHORT_GPU_TYPE = "l4"
SHORT_GPUS = 2
SHORT_MAX_MINUTES = 30
SHORT_TORCH = "2.1.0"
ALL_NODES = (*NODES, SHORT_NODE)
# What each node's fake nvidia-smi reports: name, memory (MiB), driver, compute capability.
FAKE_GPUS = {"n1": ("NVIDIA A100-SXM4-40GB", 40960, "550.54.15", "8.0"),
             "n2": ("NVIDIA A100-SXM4-40GB", 40960, "550.54.15", "8.0"),
             SHORT_NODE: ("NVIDIA L4", 23034, "535.104.05", "8.9")}


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
    short_port = node_ports[len(NODES)]
    conf.write_text("\n".join([
        f"ClusterName=ct{secrets.token_hex(3)}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctl_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # cred_expire=5 (the least SLURM takes) shortens the requeue delay from ~2 minutes to seconds:
        # a requeued job starts once its old credentials expire. Against 10: the five preemption and
        # requeue tests 149 s -> 123 s here.
        f"AuthInfo=socket={sock},cred_expire=5",
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
        f"NodeName={SHORT_NODE} NodeHostname=localhost NodeAddr=127.0.0.1 Port={short_port} CPUs=4 RealMemory=4000 "
        f"TmpDisk=2000 Gres=gpu:{SHORT_GPU_TYPE}:{SHORT_GPUS} State=UNKNOWN",
        f"PartitionName=debug Nodes=n[1-{len(NODES)}] Default=YES MaxTime=INFINITE State=UP",
        f"PartitionName={SHORT} Nodes={SHORT_NODE} MaxTime={SHORT_MAX_MINUTES} MaxNodes=1 State=UP",
    ]) + "\n")
    _write_gres_conf(root)
    return conf


def _write_task_prolog(root: Path) -> Path:
    """A TaskProlog: slurmstepd runs it before each task (with the task's environment) and sets the
    ``export`` lines it prints. Each node gets its own fake nvidia-smi first on PATH, and the short
    partition's node another torch's distribution record first on PYTHONPATH."""
    for node, (name, mib, driver, cap) in FAKE_GPUS.items():
        count = SHORT_GPUS if node == SHORT_NODE else GPUS_PER_NODE
        smi = root / "node-bin" / node / "nvidia-smi"
        smi.parent.mkdir(parents=True, exist_ok=True)
        smi.write_text("#!/bin/sh\n" + "".join(f'echo "{name}, {mib}, {driver}, {cap}"\n' for _ in range(count)))
        smi.chmod(0o755)
    record = root / "node-site" / SHORT_NODE / f"torch-{SHORT_TORCH}.dist-info"
    record.mkdir(parents=True, exist_ok=True)
    (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {SHORT_TORCH}\n")
    script = root / "task_prolog.sh"
    script.write_text("#!/bin/sh\n"
                      f'dir="{root}/node-tmp/$SLURMD_NODENAME/$SLURM_JOB_ID"\n'
                      'mkdir -p "$dir"\n'
                      'echo "export SLURM_TMPDIR=$dir"\n'
                      f'echo "export PATH={root}/node-bin/$SLURMD_NODENAME:$PATH"\n'
                      f'if [ "$SLURMD_NODENAME" = {SHORT_NODE} ]; then\n'
                      f'  echo "export PYTHONPATH={root}/node-site/{SHORT_NODE}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
                      'fi\n')
    script.chmod(0o755)
    return script


def _write_gres_conf(root: Path) -> None:
    """gres.conf beside slurm.conf: typed GPUs with placeholder device files and no detection
    (no real GPU here). Jobs get SLURM_GPUS_ON_NODE; CUDA_VISIBLE_DEVICES stays empty."""
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(GPUS_PER_NODE):
        (dev / f"gpu{i}").touch()
    for i in range(SHORT_GPUS):
        (dev / f"{SHORT_NODE}-gpu{i}").touch()
    (root / "gres.conf").write_text(
        "AutoDetect=off\n"
        f"NodeName=n[1-{len(NODES)}] Name=gpu Type={GPU_TYPE} File={dev}/gpu[0-{GPUS_PER_NODE - 1}]\n"
        f"NodeName={SHORT_NODE} Name=gpu Type={SHORT_GPU_TYPE} File={dev}/{SHORT_NODE}-gpu[0-{SHORT_GPUS - 1}]\n")


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
    node_ports = _consecutive_free_ports(len(ALL_NODES))
    conf = _write_conf(root, ctl_port, node_ports)
    os.environ["SLURM_CONF"] = str(conf)
    c = run(["slurmctld", "-f", str(conf)])
    if c.returncode != 0:
        raise RuntimeError(f"slurmctld failed: {c.stderr}")
    for node in ALL_NODES:
        d = run(["slurmd", "-f", str(conf), "-N", node])
        if d.returncode != 0:
            raise RuntimeError(f"slurmd -N {node} failed: {d.stderr}")
    cluster = SlurmCluster(root, conf)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = run(["sinfo", "-h", "-N", "-o", "%N %t"])
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        if out.returncode == 0 and all(states.get(n) == "idle" for n in ALL_NODES):
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
    # A job step still running when its slurmd stopped (a job cancelled a moment before) keeps its
    # slurmstepd waiting for that slurmd for good: ended here, found by its working directory.
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "comm").read_text().strip() == "slurmstepd" and \
                    os.readlink(proc / "cwd").startswith(str(root)):
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


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
