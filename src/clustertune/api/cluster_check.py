"""Will it run there? The recipe asked of the cluster before the queue: on SLURM the partition
and its limits, the GPUs (GRES) its nodes have, the account and QoS, ``sbatch --test-only``'s
verdict, the run's memory per GPU, and a compute node's own environment (a short probe step,
kept for a day); on SSH hosts each host's GPUs, their memory, free disk and the run's env.

Every problem is found at once and each names the key and the fix; ``validate --on``, the dry
run and the start of a SLURM or SSH run (unless ``launch.preflight: false``) all ask this.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clustertune.api.node_check import Finding, Reads, environment_findings, files_findings, gpus_asked, node_facts
from clustertune.errors import LaunchError, UserError
from clustertune.launch import node_probe, slurm_facts
from clustertune.launch.decision import Decision
from clustertune.launch.files import Placed
from clustertune.launch.gpu_types import gpu_memory_gb
from clustertune.launch.plan import LaunchPlan
from clustertune.launch.ssh import check_nodes, env_for, find_cluster
from clustertune.recipe.schema import Recipe
from clustertune.remote.config import get_cluster


class ClusterCheckError(LaunchError):
    """The cluster would refuse or fail the run; every problem found, each with its fix."""


@dataclass(frozen=True)
class ClusterReport:
    target: str  # "slurm" or an SSH cluster's name
    findings: tuple[Finding, ...]
    facts: dict[str, Any] = field(default_factory=dict)  # what was asked, for --json

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "problem"]

    def lines(self) -> list[str]:
        mark = {"ok": "ok", "problem": "PROBLEM", "note": "note", "not checked": "not checked"}
        return [f"  {mark[f.status]:<11} {f.what}: {f.said}" for f in self.findings]

    def raise_problems(self) -> None:
        if self.problems:
            head = (f"the run would not run as asked on {self.target} ({len(self.problems)} problem"
                    f"{'s' if len(self.problems) > 1 else ''}; nothing was submitted):")
            raise ClusterCheckError("\n".join([head, *self.lines(),
                                               "(skip these checks with launch.preflight=false)"]))

    def summary(self) -> str:
        """One line for a launch that passed: what was asked, and where to see it all."""
        counts = {s: sum(1 for f in self.findings if f.status == s) for s in ("ok", "note", "not checked")}
        said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        command = "validate RECIPE --on " + ("slurm" if self.target == "slurm" else self.target)
        return f"asked {self.target} before the queue: {said} (`clustertune {command}` lists them)"

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "ok": not self.problems, "findings": [asdict(f) for f in self.findings],
                **self.facts}


# -- SLURM -------------------------------------------------------------------------------------


def _partition(cluster: slurm_facts.Cluster, plan: LaunchPlan, out: list[Finding]) -> slurm_facts.Partition | None:
    name = plan.slurm.partition
    part = cluster.partitions.get(name) if name else cluster.default_partition()
    known = ", ".join(cluster.partitions) or "none"
    if part is None:
        out.append(Finding("problem", "partition",
                           f"launch.partition={name}: no such partition on cluster {cluster.name} (it has: {known})"
                           if name else f"no launch.partition and cluster {cluster.name} has no default; "
                                        f"set launch.partition to one of: {known}"))
        return None
    state = "" if part.state == "UP" else f", state {part.state}: jobs wait until it is UP"
    out.append(Finding("problem" if state else "ok", "partition",
                       f"{part.name}{' (the default)' if not name else ''}: {len(part.nodes)} node(s){state}"))
    return part


def _time(part: slurm_facts.Partition, plan: LaunchPlan, cluster: slurm_facts.Cluster, out: list[Finding]) -> None:
    limit = "no limit" if part.max_time_min is None else f"{part.max_time_min} min"
    if plan.slurm.time is None:
        out.append(Finding("ok", "time", f"launch.time unset: the partition's default (its MaxTime: {limit})"))
        return
    try:
        asked = slurm_facts.minutes(plan.slurm.time)
    except ValueError:
        out.append(Finding("problem", "time", f"launch.time={plan.slurm.time}: not a SLURM time (e.g. 30, 4:00:00, "
                                              "2-00:00:00)"))
        return
    if part.max_time_min is not None and asked is not None and asked > part.max_time_min:
        longer = [p.name for p in cluster.partitions.values()
                  if p.max_time_min is None or p.max_time_min >= asked]
        other = f", or a partition that allows it ({', '.join(longer)})" if longer else ""
        out.append(Finding("problem", "time", f"launch.time={plan.slurm.time} ({asked} min) is over partition "
                                              f"{part.name}'s MaxTime ({limit}): set launch.time={part.max_time_min}"
                                              f"{other}; a run that needs longer resumes from its checkpoints "
                                              "(launch.max_requeues)"))
        return
    out.append(Finding("ok", "time", f"launch.time={plan.slurm.time} ({asked} min) within MaxTime ({limit})"))


def _nodes_and_gpus(part: slurm_facts.Partition, plan: LaunchPlan, cluster: slurm_facts.Cluster,
                    out: list[Finding]) -> None:
    nodes = cluster.nodes_of(part)
    if part.max_nodes is not None and plan.nodes > part.max_nodes:
        out.append(Finding("problem", "nodes", f"launch.nodes={plan.nodes} is over partition {part.name}'s MaxNodes "
                                               f"({part.max_nodes}): set launch.nodes={part.max_nodes} or fewer"))
    elif plan.nodes > len(nodes):
        out.append(Finding("problem", "nodes", f"launch.nodes={plan.nodes}: partition {part.name} has {len(nodes)} "
                                               f"node(s): set launch.nodes={len(nodes)} or fewer"))
    else:
        out.append(Finding("ok", "nodes", f"{plan.nodes} of {len(nodes)} in {part.name}"))
    kind, count = gpus_asked(plan)
    if not count:
        return
    types = sorted({t or "(untyped)" for n in nodes for t in n.gpus})
    able = [n for n in nodes if (n.gpus.get(kind, 0) if kind else sum(n.gpus.values())) >= count]
    if len(able) >= plan.nodes:
        out.append(Finding("ok", "gpus", f"{count} x {kind or 'gpu'} per node: {len(able)} node(s) of {part.name} "
                                         "have them"))
        return
    where = [p.name for p in cluster.partitions.values()
             if sum(1 for n in cluster.nodes_of(p) if n.gpus.get(kind or "", 0) >= count
                    or (not kind and sum(n.gpus.values()) >= count)) >= plan.nodes]
    elsewhere = f"; partition(s) with them: {', '.join(where)} (launch.partition)" if where else ""
    has = ", ".join(f"{n.name} " + ("+".join(f"{c} {t or 'gpu'}" for t, c in n.gpus.items()) or "no GPUs")
                    for n in nodes)
    out.append(Finding("problem", "gpus", f"{count} x {kind or 'gpu'} per node on {plan.nodes} node(s) asked "
                                          f"(launch.gpu_type / gpus_per_node / gres); partition {part.name} has "
                                          f"{', '.join(types) or 'no GPUs'} ({has}){elsewhere}"))


def _accounting(cluster: slurm_facts.Cluster, plan: LaunchPlan, out: list[Finding]) -> None:
    s = plan.slurm
    if "slurmdbd" not in cluster.accounting:
        out.append(Finding("not checked", "account/QoS",
                           f"cluster {cluster.name} keeps no accounting ({cluster.accounting}); "
                           "sbatch --test-only below is the controller's own check"))
        return
    rows = slurm_facts.slurm_command(["sacctmgr", "-n", "-P", "show", "assoc", "format=account,partition,qos"])
    if rows.returncode != 0:
        out.append(Finding("not checked", "account/QoS", f"sacctmgr did not answer: {rows.stderr.strip()[:200]}"))
        return
    assoc = [line.split("|") for line in rows.stdout.splitlines() if line.count("|") >= 2]
    accounts = {a for a, _, _ in assoc}
    qos = {q for _, _, qs in assoc for q in qs.split(",") if q}
    bad = []
    if s.account and s.account not in accounts:
        bad.append(f"launch.account={s.account} is not one of yours ({', '.join(sorted(accounts)) or 'none'})")
    if s.qos and s.qos not in qos:
        bad.append(f"launch.qos={s.qos} is not one your accounts may use ({', '.join(sorted(qos)) or 'none'})")
    out.append(Finding("problem" if bad else "ok", "account/QoS",
                       "; ".join(bad) or f"{s.account or 'default account'}, {s.qos or 'default QoS'}"))


def _test_only(plan: LaunchPlan, out: list[Finding]) -> None:
    verdict = slurm_facts.test_only(plan)
    if verdict.ok:
        start = f" (estimated start {verdict.start})" if verdict.start else ""
        out.append(Finding("ok", "sbatch --test-only", f"accepted{start}: \"{verdict.said}\""))
    else:
        out.append(Finding("problem", "sbatch --test-only", f"refused: \"{verdict.said}\""))


def _node(cluster: str, plan: LaunchPlan, recipe: Recipe | None, cache: Path, refresh: bool,
          out: list[Finding], placed: tuple[Placed, ...] = ()) -> dict | None:
    reads = Reads.of(recipe, placed)
    facts, probe, cached = node_facts(cluster, plan, cache, refresh, reads)
    said = probe.said
    if facts is None:
        if probe.busy:
            again = " (within the hour before; not waited for again until then, or --refresh)" if cached else ""
            out.append(Finding("not checked", "node environment",
                               f"no node of the partition was free within {slurm_facts.PROBE_WAIT_S} s to probe "
                               f"(srun: \"{said[-200:]}\"){again}"))
        elif probe.setup_failed:
            out.append(Finding("problem", "launch.setup", f"a setup line failed on a compute node, which stops the "
                                                         f"job there: \"{said[-400:]}\"; fix the line"))
        else:
            out.append(Finding("problem", "node environment",
                               f"the probe step failed on a compute node: \"{said[-400:]}\" (after launch.setup it "
                               f"runs {plan.python}: the nodes must see that Python at the same path)"))
        return None
    found = environment_findings(facts, node_probe.facts(), recipe, bool(gpus_asked(plan)[1]))
    if cached:
        found[0] = Finding(found[0].status, found[0].what, found[0].said + " (probed within the day; --refresh "
                                                                             "probes again)")
    if slurm_facts.setup_reads_the_run(plan):
        found.append(Finding("note", "launch.setup", "probed without the setup lines: they read the run's own "
                                                    "files, which exist once it is submitted"))
    out += found + files_findings(facts, reads, placed)
    return facts


# -- memory --------------------------------------------------------------------------------------


def gpu_bytes_of(kind: str | None, gpus: list[dict] | None) -> tuple[str, int] | None:
    """(the GPU's name, its memory in bytes): what the node's nvidia-smi reports, else the type's
    memory from the table (GRES type names; clusters.yaml's gpu_memory_gb first)."""
    for g in gpus or []:
        if "error" not in g and g.get("memory_mib"):
            return str(g["name"]), int(g["memory_mib"]) * 2**20
    gb = gpu_memory_gb(kind) if kind else None
    return (str(kind), int(gb * 1e9)) if gb else None


def memory_findings(recipe: Recipe | None, world: int, kind: str | None, gpus: list[dict] | None) -> list[Finding]:
    if recipe is None:
        return []  # a user's own command: its memory is its own
    gpu = gpu_bytes_of(kind, gpus)
    if gpu is None:
        return [Finding("not checked", "memory",
                        f"GPU type {kind or '(untyped)'} has no known memory: add it to clusters.yaml, e.g. "
                        f"'gpu_memory_gb: {{{kind or 'TYPE'}: 80}}'")]
    # Deferred: the estimate builds the model's shape with torch, which a CPU job's check never needs.
    from clustertune.api.cluster_fit import fit, gib

    try:
        found = fit(recipe, world, gpu[1])
    except UserError as exc:  # e.g. a dry run's run:<run> base that is not under the default runs root
        return [Finding("not checked", "memory", f"the model could not be sized here: {exc}")]
    head = f"{gib(found.needs)} per GPU ({found.strategy}, {world} rank(s)) of {gpu[0]}'s {gib(gpu[1])}"
    if found.fits:
        return [Finding("ok", "memory", head)]
    if not found.suggestions:
        return [Finding("problem", "memory", f"{head}: does not fit, and no single change tried fits (a larger "
                                             "GPU, more GPUs with a sharded strategy, or a smaller model)")]
    ways = "; ".join(f"`{' '.join(o)}` ({gib(b)})" for o, b in found.suggestions)
    return [Finding("problem", "memory", f"{head}: does not fit (about 90% is usable). Would fit: {ways}; the "
                                         "first is the smallest change")]


# -- the doors -----------------------------------------------------------------------------------


def check_slurm(recipe: Recipe | None, plan: LaunchPlan, cache: Path, refresh: bool = False,
                placed: tuple[Placed, ...] = ()) -> ClusterReport:
    try:
        cluster = slurm_facts.read_cluster()
    except LaunchError as exc:  # no SLURM commands here, or no controller: the submission says so itself
        return ClusterReport("slurm", (Finding("not checked", "cluster", f"SLURM could not be asked from here: {exc}"),))
    out: list[Finding] = []
    part = _partition(cluster, plan, out)
    if part is not None:
        _time(part, plan, cluster, out)
        _nodes_and_gpus(part, plan, cluster, out)
    _accounting(cluster, plan, out)
    _test_only(plan, out)
    facts = None
    refused = any(f.status == "problem" and f.what in ("partition", "gpus", "sbatch --test-only") for f in out)
    if part is not None and not refused:  # a step the controller would refuse cannot probe either
        facts = _node(cluster.name, plan, recipe, cache, refresh, out, placed)
    kind, count = gpus_asked(plan)
    if count and kind is None and part is not None:  # untyped: the partition's one type, if it has one
        types = {t for n in cluster.nodes_of(part) for t in n.gpus if t}
        kind = types.pop() if len(types) == 1 else None
    if count:
        world = plan.nodes * (plan.procs_per_node or count)
        out += memory_findings(recipe, world, kind, (facts or {}).get("gpus"))
    else:
        out.append(Finding("not checked", "memory", "the job asks SLURM for no GPUs (launch.gpus_per_node, "
                                                    "gpu_type, gres)"))
    return ClusterReport("slurm", tuple(out), {"cluster": cluster.name, "version": cluster.version,
                                               "partition": part.name if part else None, "node": facts})


def check_ssh(recipe: Recipe | None, plan: LaunchPlan, launch: Any, env: Any = None) -> ClusterReport:
    """Each host of an SSH cluster: reachable, its GPUs against the ranks and the memory the run
    needs, free disk under its root, and whether the run's env is built there yet."""
    cluster_name = str(launch.cluster)
    cluster = find_cluster(cluster_name)  # an unknown name, too few hosts: the backend's own words
    check_nodes(launch, len(cluster.hosts))
    rows = cluster.check(env)
    out: list[Finding] = []
    used = rows[:plan.nodes]
    for row in used:
        host = row["host"]
        if not row.get("ok"):
            out.append(Finding("problem", f"host {host}", row.get("error", "unreachable")))
            continue
        gpus = row.get("gpus") or []
        ranks = plan.procs_per_node or len(gpus) or 1
        wants_gpus = recipe is None or recipe.train.device != "cpu"
        if plan.procs_per_node and gpus and plan.procs_per_node > len(gpus):
            out.append(Finding("problem", f"host {host}", f"launch.procs_per_node={plan.procs_per_node} but it has "
                                                         f"{len(gpus)} GPU(s): set launch.procs_per_node={len(gpus)}"))
        out.append(Finding("ok", f"host {host}", f"Python {row.get('python')}, "
                                                 f"{', '.join(g['name'] for g in gpus) or 'no GPU'}, "
                                                 f"{row.get('free_disk_gib')} GiB free"))
        if "env_present" in row and not row["env_present"]:
            out.append(Finding("note", f"host {host}", "the run's env is not built there yet: the run builds it "
                                                      "first (pip, which needs the package index from that host)"))
        if gpus and wants_gpus:
            mib = min(int(g.get("memory_mib") or 0) for g in gpus)
            lone = [{"name": gpus[0]["name"], "memory_mib": mib}]
            out += [Finding(f.status, f"memory on {host}", f.said)
                    for f in memory_findings(recipe, plan.nodes * ranks, None, lone)]
    if len(rows) < plan.nodes:
        out.append(Finding("problem", "nodes", f"launch.nodes={plan.nodes} but cluster {cluster_name} has "
                                               f"{len(rows)} host(s)"))
    return ClusterReport(cluster_name, tuple(out), {"hosts": rows})


def check_decision(decision: Decision, refresh: bool = False) -> ClusterReport | None:
    """The cluster's answers for a decided launch; None for a local one, or launch.preflight false."""
    ln = decision.recipe.launch
    if decision.backend not in ("slurm", "ssh") or not ln.preflight:
        return None
    recipe = decision.recipe if decision.user_command is None else None  # a command's memory is its own
    if decision.backend == "slurm":
        return check_slurm(recipe, decision.plan, decision.cache, refresh, decision.placed)
    return check_ssh(recipe, decision.plan, ln, env_for(decision.plan, ln))


def target_overrides(target: str) -> list[str]:
    """``--on TARGET`` as launch keys: ``slurm`` (the SLURM cluster this machine submits to), or the
    name of an SSH cluster in clusters.yaml."""
    if target == "slurm":
        return ["launch.backend=slurm", "launch.preflight=true"]
    get_cluster(target)  # an unknown name: the error lists the known ones
    return ["launch.backend=ssh", f"launch.cluster={target}", "launch.preflight=true"]

