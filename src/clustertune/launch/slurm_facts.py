"""What a SLURM cluster says about itself, asked from the login node before anything is queued:
its partitions and their limits, its nodes and their GPUs (GRES), ``sbatch --test-only``'s verdict
on a rendered script, and a short probe step on a compute node (:mod:`~clustertune.launch.node_probe`).

The controller is asked with ``scontrol show ... --json`` where the SLURM build offers it, else
with ``scontrol show ... -o`` (one ``key=value`` line per record), which every version prints.
"""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clustertune.errors import LaunchError
from clustertune.launch import node_probe
from clustertune.launch.plan import LaunchPlan, shell_expanding_quote
from clustertune.launch.sbatch import render_sbatch
from clustertune.launch.slurm import slurm_command
from clustertune.runs.paths import FILES_ENV

SETUP_START, SETUP_DONE = "CT-NODE-SETUP-START", "CT-NODE-SETUP-DONE"
# How long the probe step may wait for a node before it is reported as not run (srun --immediate).
PROBE_WAIT_S = 30


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool
    state: str
    max_time_min: int | None  # None: no limit
    max_nodes: int | None  # None: no limit


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mb: int
    state: str
    gpus: dict[str, int] = field(default_factory=dict)  # GRES gpu type ("" when untyped) -> count


@dataclass(frozen=True)
class Cluster:
    """The cluster's name (its ``ClusterName``) and version, partitions and nodes."""

    name: str
    version: str
    accounting: str
    partitions: dict[str, Partition]
    nodes: dict[str, Node]

    def default_partition(self) -> Partition | None:
        return next((p for p in self.partitions.values() if p.default), None)

    def nodes_of(self, partition: Partition) -> list[Node]:
        return [self.nodes[n] for n in partition.nodes if n in self.nodes]


def minutes(text: str | int | None) -> int | None:
    """A SLURM time (``30``, ``1:00:00``, ``2-12``, ``1-00:00:00``, ``UNLIMITED``) in minutes,
    rounded up; None for no limit. Raises ValueError for text SLURM would not accept."""
    if text is None:
        return None
    s = str(text).strip()
    if s.upper() in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days = 0
    if "-" in s:
        d, s = s.split("-", 1)
        days = int(d)
        parts = [int(p) for p in s.split(":")]  # days-hours[:minutes[:seconds]]
        parts += [0] * (3 - len(parts))
        h, m, sec = parts
    else:
        parts = [int(p) for p in s.split(":")]  # minutes | minutes:seconds | hours:minutes:seconds
        if len(parts) == 1:
            h, m, sec = 0, parts[0], 0
        elif len(parts) == 2:
            h, m, sec = 0, parts[0], parts[1]
        elif len(parts) == 3:
            h, m, sec = parts
        else:
            raise ValueError(s)
    return days * 1440 + h * 60 + m + (1 if sec else 0)


def expand_hostlist(text: str) -> tuple[str, ...]:
    """``n[1-3],gpu07`` -> n1, n2, n3, gpu07 (SLURM's hostlist syntax; zero padding kept)."""
    names: list[str] = []
    for prefix, body, rest in re.findall(r"([^,\[]*)(?:\[([^\]]*)\])?([^,]*)", text):
        if not prefix and not body:
            continue
        if not body:
            names.append(prefix + rest)
            continue
        for piece in body.split(","):
            lo, _, hi = piece.partition("-")
            if not hi:
                names.append(f"{prefix}{lo}{rest}")
                continue
            width = len(lo) if lo.startswith("0") else 0
            names += [f"{prefix}{i:0{width}d}{rest}" for i in range(int(lo), int(hi) + 1)]
    return tuple(names)


def gpus_of_gres(gres: str) -> dict[str, int]:
    """``gpu:a100:4(S:0-1),gpu:l4:2,shard:8`` -> {a100: 4, l4: 2}; an untyped ``gpu:2`` -> {"": 2}."""
    found: dict[str, int] = {}
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        kind, count = (parts[1], parts[2]) if len(parts) >= 3 else ("", parts[1])
        if count.isdigit():
            found[kind] = found.get(kind, 0) + int(count)
    return found


def _records(text: str) -> list[dict[str, str]]:
    """``scontrol show X -o``: one record per line, ``Key=Value`` pairs (values without spaces,
    except the last keys of a node line, which are not read here)."""
    out = []
    for line in text.splitlines():
        if line.strip():
            out.append(dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line)))
    return out


def _limit(value: str | None) -> int | None:
    return None if value is None or not value.isdigit() else int(value)


def _partitions_from_text(text: str) -> dict[str, Partition]:
    parts = {}
    for r in _records(text):
        name = r.get("PartitionName", "")
        parts[name] = Partition(name, expand_hostlist(r.get("Nodes", "")), r.get("Default") == "YES",
                                r.get("State", "UP"), minutes(r.get("MaxTime")), _limit(r.get("MaxNodes")))
    return parts


def _nodes_from_text(text: str) -> dict[str, Node]:
    nodes = {}
    for r in _records(text):
        name = r.get("NodeName", "")
        nodes[name] = Node(name, _limit(r.get("CPUTot")) or 0, _limit(r.get("RealMemory")) or 0,
                           r.get("State", "UNKNOWN"), gpus_of_gres(r.get("Gres", "")))
    return nodes


def _json_number(v: object) -> int | None:
    """A number of SLURM's JSON: plain, or ``{"set": bool, "infinite": bool, "number": N}``."""
    if isinstance(v, dict):
        return int(v["number"]) if v.get("set") and not v.get("infinite") else None
    return int(v) if isinstance(v, (int, float)) else None


def _partitions_from_json(data: dict) -> dict[str, Partition]:
    parts = {}
    for p in data.get("partitions", []):
        limits = p.get("maximums", {})
        flags = p.get("partition", {}).get("state") or p.get("state") or ["UP"]
        state = flags[0] if isinstance(flags, list) and flags else str(flags)
        default = "DEFAULT" in (p.get("flags") or p.get("partition", {}).get("flags") or [])
        nodes = p.get("nodes", {})
        names = nodes.get("configured", "") if isinstance(nodes, dict) else str(nodes)
        parts[p["name"]] = Partition(p["name"], expand_hostlist(names), default, state,
                                     _json_number(limits.get("time", p.get("maximum_time"))),
                                     _json_number(limits.get("nodes", p.get("maximum_nodes_per_job"))))
    return parts


def _nodes_from_json(data: dict) -> dict[str, Node]:
    nodes = {}
    for n in data.get("nodes", []):
        state = n.get("state")
        nodes[n["name"]] = Node(n["name"], int(n.get("cpus", 0)), int(n.get("real_memory", 0)),
                                state[0] if isinstance(state, list) and state else str(state),
                                gpus_of_gres(n.get("gres", "")))
    return nodes


def _show(kind: str) -> tuple[str, dict | None]:
    """``scontrol show KIND``: as JSON where offered (second item), else the one-line records."""
    js = slurm_command(["scontrol", "show", kind, "--json"])
    if js.returncode == 0:
        try:
            return "", json.loads(js.stdout)
        except json.JSONDecodeError:
            pass
    out = slurm_command(["scontrol", "show", kind, "-o"])
    if out.returncode != 0:
        raise LaunchError(f"`scontrol show {kind}` failed: {(out.stderr or out.stdout).strip()}; "
                          "is the SLURM controller reachable from here (`scontrol ping`)?")
    return out.stdout, None


def read_cluster() -> Cluster:
    """The controller's answer about its partitions, nodes and configuration."""
    text, js = _show("partition")
    partitions = _partitions_from_json(js) if js is not None else _partitions_from_text(text)
    text, js = _show("node")
    nodes = _nodes_from_json(js) if js is not None else _nodes_from_text(text)
    conf = slurm_command(["scontrol", "show", "config"])
    values = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", conf.stdout, flags=re.M)) if conf.returncode == 0 else {}
    return Cluster(values.get("ClusterName", "slurm"), values.get("SLURM_VERSION", "?"),
                   values.get("AccountingStorageType", "?"), partitions, nodes)


@dataclass(frozen=True)
class TestOnly:
    ok: bool
    said: str  # sbatch's own words
    start: str | None  # the estimated start time, where SLURM gives one


def test_only(plan: LaunchPlan) -> TestOnly:
    """``sbatch --test-only`` of the script the run would submit: the controller checks it against
    its partitions, limits, account and QoS, and estimates a start, without queueing anything."""
    with tempfile.TemporaryDirectory(prefix="ct-test-only-") as tmp:
        script = Path(tmp) / "job.sbatch"
        script.write_text(render_sbatch(plan), encoding="utf-8")
        out = slurm_command(["sbatch", "--test-only", f"--output={tmp}/out", str(script)])
    said = " ".join(line.removeprefix("sbatch: ").strip() for line in (out.stderr + out.stdout).splitlines()
                    if line.strip())
    start = re.search(r"to start at (\S+)", said)
    return TestOnly(out.returncode == 0, said, start.group(1) if start else None)


def probe_argv(plan: LaunchPlan, paths: list[str] = (), hub: list[str] = (), wait_s: int | None = None) -> list[str]:
    """One short step on one node of the run's partition, with the run's account and QoS and one of
    the GPUs it asks for (a site may show a step only the GPUs it was given), running the job's
    ``launch.setup`` lines and then the probe under the job's Python."""
    s = plan.slurm
    wait_s = PROBE_WAIT_S if wait_s is None else wait_s
    argv = ["srun", "--nodes=1", "--ntasks=1", "--time=2", f"--immediate={wait_s}", "--job-name=ct-node-probe",
            "--export=ALL"]
    argv += [f"--{k}={v}" for k, v in (("partition", s.partition), ("account", s.account), ("qos", s.qos),
                                         ("constraint", s.constraint)) if v]
    if s.gpus_per_node or s.gpus_per_task or (s.gres and s.gres.startswith("gpu")):
        argv.append(f"--gpus={s.gpu_type + ':' if s.gpu_type else ''}1")
    asked = [f"export CT_PROBE_PATHS={shlex.quote(json.dumps(list(paths)))}",
             f"export CT_PROBE_HUB={shlex.quote(json.dumps(list(hub)))}"]
    setup = [] if setup_reads_the_run(plan) else list(plan.setup)
    script = "\n".join([*(f"export {k}={shell_expanding_quote(v)}" for k, v in plan.env), *asked,
                        # A failing setup line stops the job (set -e), and the probe the same way; the
                        # mark after the lines tells that apart from the probe's own failure.
                        f"echo {SETUP_START}", "set -e", *setup, "set +e", f"echo {SETUP_DONE}",
                        f"exec {shlex.quote(plan.python)} -c {shlex.quote(node_probe.source())}"])
    return argv + ["/bin/bash", "-c", script]


def setup_reads_the_run(plan: LaunchPlan) -> bool:
    """Whether a ``launch.setup`` line reads the run's own directory (its ``files/``, ``$CLUSTERTUNE_FILES``), which does not
    exist before the run is submitted: the probe then runs without the setup lines."""
    return any(plan.run_dir in line or "CT_RUN_DIR" in line or FILES_ENV in line for line in plan.setup)


@dataclass(frozen=True)
class Probe:
    facts: dict[str, object] | None  # None: the probe did not answer (see ``said``)
    said: str
    setup_failed: bool = False  # a launch.setup line stopped it

    @property
    def busy(self) -> bool:
        """No node was free within the wait (``srun --immediate`` gave up): nothing was probed."""
        return self.facts is None and any(w in self.said for w in ("Unable to allocate", "immediate", "Immediate"))


def probe(plan: LaunchPlan, paths: list[str] = (), hub: list[str] = ()) -> Probe:
    """The probe step (:func:`probe_argv`), also asked whether the node sees ``paths`` and has the
    hub models ``hub`` in its cache."""
    out = slurm_command(probe_argv(plan, paths, hub), timeout=PROBE_WAIT_S + 90)
    found = node_probe.parse(out.stdout)
    said = "\n".join(part.strip() for part in (out.stderr, out.stdout) if part.strip()) if found is None else ""
    # Started on the node but never through its setup lines: one of them stopped it (a step srun
    # never started, refused or not allocated, is told apart by its own words).
    setup_failed = found is None and SETUP_START in out.stdout and SETUP_DONE not in out.stdout
    shown = "\n".join(line for line in said.splitlines() if line.strip() != SETUP_START)
    return Probe(found, shown[-600:], setup_failed=setup_failed)
