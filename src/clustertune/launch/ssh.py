"""The ``ssh`` backend: a recipe trained on the first ``launch.nodes`` hosts of an SSH cluster.

The submitting host prepares the data once; each host then gets, over its multiplexed ssh
connection: clustertune's code (a content-addressed snapshot), the prepared data (one copy per
host, keyed by fingerprint, reused by later runs), the run directory, and the env. Every host
runs the plan's node command (torchrun with a c10d rendezvous on the first host) inside its
copy of the run directory, as a run of the host's helper under an attempt key
``<run id>-<attempt>``: state, logs and cancel then work from any process through
``run.json`` alone.

Hosts need not share a filesystem. Global rank 0 lands on whichever host joined the
rendezvous first, so results are gathered from every host (newest file wins) and each attempt
starts from the same run directory (checkpoints included) on every host.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import posixpath
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import ClusterError, LaunchError, RunError
from clustertune.launch.plan import LaunchPlan, node_command
from clustertune.recipe.schema import LaunchSection, Recipe
from clustertune.runs.paths import CANCEL_FILE, STOP_FILE, HostRunPaths
from clustertune.runs.records import RunInfo
from clustertune.runs.job import Announce, follow, wait
from clustertune.runs.run import Run
from clustertune.runs.state import RunState

BACKEND = "ssh"
# Files the submitting side owns (never copied back) and node-side scratch (never copied at all).
_LOCAL_ONLY = ("/run.json", "/data.json")
_SCRATCH = (".tmp-*", f"/{STOP_FILE}", f"/{CANCEL_FILE}")
# How long a cancel waits for the ranks to agree on a step and checkpoint before killing them.
GRACEFUL_CANCEL_S = 90.0


# -- which hosts, which commands (pure) ---------------------------------------------------------


def find_cluster(name: str) -> Any:
    """The configured cluster ``name``; an unknown one names the closest and how to add it."""
    from clustertune.remote.cluster import Cluster
    from clustertune.remote.config import clusters_file, list_clusters

    known = [c.name for c in list_clusters()]
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise LaunchError(f"launch.cluster: no cluster {name!r} in {clusters_file()}{hint}; known: "
                          f"{', '.join(known) or 'none yet'}. Add it with `clustertune cluster add {name} HOST...`")
    return Cluster.named(name)


def check_nodes(launch: LaunchSection, n_hosts: int) -> None:
    if launch.nodes > n_hosts:
        raise LaunchError(f"launch.nodes={launch.nodes} but cluster {launch.cluster!r} has {n_hosts} host(s); "
                          f"set launch.nodes<={n_hosts} or add hosts (`clustertune cluster add {launch.cluster} HOST...`)")


def attempt_key(run_id: str, attempt: int) -> str:
    """The run key of one attempt on the hosts (a host never reuses a key)."""
    return f"{run_id}-{attempt}"


def rendezvous_port(key: str) -> int:
    """A port derived from the attempt key: every host computes the same one, and a new
    attempt never meets the stale rendezvous of an earlier one."""
    return 20000 + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 20000


def host_commands(plan: LaunchPlan, addresses: list[str], key: str, procs: list[int]) -> list[list[str]]:
    """The argv each host runs (in its copy of the run directory, the env's bin first on PATH)."""
    return [node_command(plan, i, addresses, rendezvous_port(key), key, procs[i]) for i in range(plan.nodes)]


def procs_on_host(plan: LaunchPlan, gpus: list[dict[str, Any]]) -> int:
    """Training processes on a host: ``launch.procs_per_node`` when set, else one per GPU the
    host reports (``cluster check``'s list), 1 on a host without GPUs."""
    return plan.procs_per_node or max(1, len(gpus))


def host_gpus(cluster: Any, i: int) -> list[dict[str, Any]]:
    """Host i's GPUs, from its nvidia-smi (none without one): the same query and parser as
    ``cluster check``, without copying anything to the host (a dry run asks too)."""
    from clustertune.remote.runner_gpus import GPU_QUERY, parse_gpus

    r = cluster.conn(i).run(["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv"])
    return parse_gpus(r.text) if r.rc == 0 else []


def describe_procs(procs: list[int]) -> str:
    return str(procs[0]) if len(set(procs)) == 1 else "/".join(map(str, procs))


def dry_run_lines(plan: LaunchPlan, launch: LaunchSection) -> list[str]:
    cluster = find_cluster(str(launch.cluster))
    check_nodes(launch, len(cluster.hosts))
    hosts = cluster.hosts[: plan.nodes]
    key = attempt_key(plan.run_id, 1)
    out = [f"# ssh cluster {cluster.name}: {plan.nodes} host(s), rendezvous at {hosts[0].address}:{rendezvous_port(key)}"]
    procs, notes = [], []
    for i in range(plan.nodes):
        if plan.procs_per_node:
            procs.append(plan.procs_per_node)
            continue
        # Unset: one process per GPU, as the host reports them now (the launch asks again).
        try:
            gpus = host_gpus(cluster, i)
            procs.append(procs_on_host(plan, gpus))
            notes.append(f"{len(gpus)} GPU(s)" if gpus else "no GPU")
        except ClusterError as exc:
            procs.append(1)
            notes.append(f"GPUs unknown, 1 assumed ({exc})")
    for i, argv in enumerate(host_commands(plan, [h.address for h in hosts], key, procs)):
        rdir = HostRunPaths(hosts[i].root, plan.run_id).run_dir
        how = f"launch.procs_per_node={plan.procs_per_node}" if plan.procs_per_node else notes[i]
        out.append(f"# host {i} {hosts[i].label}: {procs[i]} process(es), {how}; in {shlex.quote(rdir)}:")
        out.append(shlex.join(argv))
    return out


# -- submitting ---------------------------------------------------------------------------------


def _env_for(plan: LaunchPlan, launch: LaunchSection) -> Any:
    from clustertune.remote.envs import Env

    reqs = list(launch.requirements)
    if not reqs and not launch.site_packages_from:
        reqs = own_dependencies()
    return Env(requirements=tuple(reqs), site_packages_from=launch.site_packages_from,
               env_vars=dict(plan.env), secrets=plan.env_passthrough)


def own_dependencies() -> list[str]:
    """What clustertune itself needs on a host (its code travels as a snapshot), from this
    install's metadata: the default env when a recipe names none."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        found = requires("clustertune") or []
    except PackageNotFoundError:
        found = []
    return sorted(r for r in found if "extra ==" not in r)


def _code_files() -> tuple[Path, list[str], str]:
    """clustertune's own package: the folder, its files, their hash."""
    from clustertune.remote.envs import folder_files, tree_hash

    pkg = Path(__file__).resolve().parents[1]  # clustertune/launch/ssh.py -> clustertune/
    files = folder_files(pkg)
    return pkg, files, tree_hash(pkg, files)


def _prepare_host(cluster: Any, i: int, run: Run, env: Any, data_ref: dict[str, Any],
                  code: tuple[Path, list[str], str]) -> str:
    """Env, code, data and run directory on host ``i``; returns the run directory there (absolute)."""
    from clustertune.data.manifest import MANIFEST, load_manifest
    from clustertune.remote.transport import shell_join

    conn = cluster.conn(i)
    rdir = HostRunPaths(cluster.root(i), run.id).run_dir
    # One round trip: the run directory exists, last attempt's stop requests are gone, and the
    # absolute path comes back (a relative root is under the login directory).
    r = conn.check_call(shell_join(["mkdir", "-p", rdir], "&&", ["cd", rdir], "&&",
                                   ["rm", "-f", STOP_FILE, CANCEL_FILE], "&&", ["pwd", "-P"]),
                        what=f"creating the run directory {rdir}")
    abs_rdir = r.text.strip().splitlines()[-1]
    root = posixpath.dirname(posixpath.dirname(abs_rdir))
    cluster.ensure_env(i, env)
    pkg, files, code_hash = code
    cluster.snapshot_to(i, pkg, posixpath.join(root, "code", f"clustertune-{code_hash}", "clustertune"), files)
    src = Path(data_ref["dir"])
    man = load_manifest(src)
    data_dir = posixpath.join(root, "data", man.fingerprint)
    cluster.snapshot_to(i, src, data_dir, sorted([*man.files, MANIFEST]))
    conn.rsync(["-a", *[f"--exclude={p}" for p in _SCRATCH], f"{run.paths.root}/", conn.remote(abs_rdir + "/")])
    # The host's data reference points at its own copy of the prepared data.
    host_ref = {**data_ref, "dir": data_dir, "manifest": posixpath.join(data_dir, MANIFEST)}
    conn.check_call(shell_join(["cat"], ">", [posixpath.join(abs_rdir, run.paths.data.name)]),
                    input=(json.dumps(host_ref, indent=2) + "\n").encode(), what="writing the host's data.json")
    return abs_rdir


def submit(plan: LaunchPlan, run: Run, launch: LaunchSection) -> SshJob:
    """Start the next attempt of ``run`` on the cluster's first ``plan.nodes`` hosts; returns at once."""
    from clustertune.remote.cluster import EXIT_MISSING
    from clustertune.remote.config import client_id
    from clustertune.remote.transport import shell_join

    cluster = find_cluster(str(launch.cluster))
    check_nodes(launch, len(cluster.hosts))
    nodes = list(range(plan.nodes))
    hosts = [cluster.hosts[i] for i in nodes]
    key = attempt_key(run.id, len(run.attempts) + 1)
    addresses = [h.address for h in hosts]
    data_ref = json.loads(run.paths.data.read_text(encoding="utf-8"))
    code = _code_files()
    run.set_remote({
        "cluster": cluster.name, "kind": "train", "nodes": nodes, "client": client_id(),
        "hosts": [h.to_dict() for h in cluster.hosts], "key": key, "keep_on_cluster": launch.keep_on_cluster,
        "rendezvous": f"{hosts[0].address}:{rendezvous_port(key)}", "env_vars": sorted(plan.env_passthrough),
        "gathered": False,
    })
    # Opened (PENDING) before the copy: every host's run.json then shows this attempt open, and
    # the node entry on global rank 0 records how it ends. RUNNING once every host has started.
    run.start_attempt(job_id=key, state=RunState.PENDING)

    def start(i: int) -> dict[str, Any]:
        nproc = procs_on_host(plan, [] if plan.procs_per_node else host_gpus(cluster, i))
        argv = node_command(plan, i, addresses, rendezvous_port(key), key, nproc)
        abs_rdir = _prepare_host(cluster, i, run, env, data_ref, code)
        root = posixpath.dirname(posixpath.dirname(abs_rdir))
        runtime = env.runtime_vars()  # plan env plus pass-through values: on stdin, never argv
        # The code snapshot first on the path: the run uses the code as it was when submitted.
        runtime["PYTHONPATH"] = ":".join(p for p in (posixpath.join(root, "code", f"clustertune-{code[2]}"),
                                                     runtime.get("PYTHONPATH")) if p)
        header = {"argv": argv, "cwd": abs_rdir, "env": runtime, "client": client_id()}
        _, py = cluster.env_python(i, env)
        cmd = shell_join(["test", "-f", cluster.runner_path(i)], "||", f"exit {EXIT_MISSING};",
                         [py, cluster.runner_path(i), "start", cluster.root(i), key, "--kind", "exec"])
        payload = json.dumps(header).encode() + b"\n"
        r = cluster.run_or_repair(i, cmd, input=payload)
        if r.rc != 0:
            raise ClusterError(f"{cluster.hosts[i].label}: could not start attempt {key} (exit {r.rc}): {r.err.strip()[-1500:]}")
        return {**json.loads(r.text.strip().splitlines()[-1]), "procs": nproc}

    env = _env_for(plan, launch)
    try:
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            answers = list(pool.map(start, nodes))
    except BaseException as exc:
        try:
            SshJob(run).stop_hosts()  # a host that did start must not wait at the rendezvous forever
        except ClusterError:
            pass  # the host that failed is unreachable; the others are stopped as far as they answer
        run.reload()
        if not run.state.terminal:
            run.transition(RunState.FAILED, reason=f"could not start on the cluster: {exc}")
        raise
    run.reload()
    run.record_attempt(job_id=key + "@" + ",".join(f"{h.label}:{a.get('pid', '')}" for h, a in zip(hosts, answers)))
    run.update_remote(started=True, procs_per_node=[a["procs"] for a in answers])
    run.transition(RunState.RUNNING)
    return SshJob(run)


def _remote(run: Run) -> dict[str, Any]:
    if run.info.remote is None:
        raise RunError(f"run {run.id} has no 'remote' section in {run.paths.run_json}")
    return run.info.remote


# -- following a run ----------------------------------------------------------------------------


@dataclass
class SshJob:
    run: Run
    _hosts: Any = field(default=None, init=False, repr=False)  # the cluster, connected once

    @property
    def remote(self) -> dict[str, Any]:
        if self.run.info.remote is None:
            raise RunError(f"run {self.run.id} has no 'remote' section in {self.run.paths.run_json}")
        return self.run.info.remote

    @property
    def key(self) -> str:
        return str(self.remote["key"])

    def _cluster(self) -> Any:
        from clustertune.remote.backend import cluster_of

        return cluster_of(self.run)

    def _nodes(self, node: int | None = None) -> list[int]:
        nodes = [int(n) for n in self.remote["nodes"]]
        if node is None:
            return nodes
        if node not in nodes:
            raise RunError(f"run {self.run.id} ran on nodes {nodes}; it has no node {node}")
        return [node]

    def _host_states(self, cluster: Any) -> list[dict[str, Any]]:
        return [cluster.helper_json(i, "status", self.key) for i in self._nodes()]

    def _rank0_record(self, cluster: Any) -> tuple[RunState, str | None] | None:
        """How global rank 0 recorded the attempt's end in its host's run.json (it may be on
        any host); None when no host has a terminal record (a crash before it could write)."""
        for i in self._nodes():
            r = cluster.conn(i).run(["cat", HostRunPaths(cluster.root(i), self.run.id).file(self.run.paths.run_json.name)])
            try:
                info = RunInfo.model_validate_json(r.text) if r.rc == 0 else None
            except ValueError:  # pydantic's ValidationError is one: a torn or foreign file
                continue
            if info is None or len(info.attempts) != len(self.run.attempts):
                continue  # a copy from an earlier attempt
            if info.state.terminal:
                return info.state, info.reason
        return None

    def state(self) -> RunState:
        self.run.reload()
        if self.run.info.remote is None:
            return self.run.state  # data still being prepared here: no host has it yet
        if self.run.state.terminal:
            self._gather_once()
            return self.run.state
        if self.run.state is not RunState.RUNNING:
            return self.run.state
        cluster = self._cluster()
        states = self._host_states(cluster)
        if any(s.get("state") in ("RUNNING", "UNKNOWN") for s in states):
            return self.run.state
        final = self._rank0_record(cluster)
        if self.remote.get("cancel_requested"):
            state, reason = RunState.CANCELLED, "cancelled by `clustertune cancel`"
        elif final is not None:
            state, reason = final
        elif all(s.get("state") == "COMPLETED" for s in states):
            state, reason = RunState.COMPLETED, None
        else:
            why = "; ".join(f"node {i}: {s.get('reason') or s.get('state')}" for i, s in zip(self._nodes(), states))
            state, reason = RunState.FAILED, f"{why}\nlast lines:\n{self._tail(cluster)}"
        self.run.reload()
        if not self.run.state.terminal:
            self.run.transition(state, reason=reason)
        self._gather_once()
        return self.run.state

    def _tail(self, cluster: Any, lines: int = 15) -> str:
        out = []
        for i in self._nodes():
            text = cluster.helper(i, "logs", self.key).text
            out += [f"[node {i}] {line}" for line in text.splitlines()[-lines:]]
        return "\n".join(out)

    def settled(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> RunState:
        return wait(self, timeout)

    def log_nodes(self, node: int | None) -> list[int | None]:
        if self.run.reload().info.remote is None:
            return []  # not on the hosts yet
        return list(self._nodes(node))

    def read_log(self, node: int | None, offset: int) -> bytes:
        assert node is not None  # every log of an SSH run is a host's
        if self._hosts is None:
            self._hosts = self._cluster()
        return self._hosts.helper(node, "logs", self.key, "--offset", str(offset)).stdout

    def logs(self, node: int | None = None) -> str:
        if self.run.reload().info.remote is None:
            return ""
        cluster = self._cluster()
        nodes = self._nodes(node)
        out = []
        for i in nodes:
            r = cluster.helper(i, "logs", self.key)
            if r.rc == 3:
                raise RunError(f"run {self.run.id} is not on {cluster.hosts[i].label} any more (removed by gc?)")
            out.append(r.text if len(nodes) == 1 else "".join(f"[node {i}] {line}\n" for line in r.text.splitlines()))
        return "".join(out)

    def follow(self, node: int | None = None, poll: float = 1.0) -> Iterator[str]:
        return follow(self, node, poll)

    def stop_hosts(self, graceful_s: float = 0.0) -> None:
        """Ask every host's ranks to checkpoint and stop (the stop file, agreed at the next log
        step); after ``graceful_s`` seconds kill whatever still runs."""
        from clustertune.remote.transport import shell_join

        cluster = self._cluster()
        nodes = self._nodes()

        def ask(i: int) -> None:
            host = HostRunPaths(cluster.root(i), self.run.id)
            cluster.conn(i).run(shell_join(["test", "-d", host.run_dir], "&&", "{", ["touch", host.cancel_request],
                                           "&&", ["echo", "TERM"], ">", [host.stop_request], ";", "}"))

        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            list(pool.map(ask, nodes))
        deadline = time.monotonic() + graceful_s
        while time.monotonic() < deadline:
            if all(s.get("state") not in ("RUNNING",) for s in self._host_states(cluster)):
                return
            time.sleep(1.0)
        for i in nodes:
            cluster.helper(i, "cancel", self.key)

    def cancel(self) -> None:
        state = self.state()
        deadline = time.monotonic() + 300
        while state in (RunState.CREATED, RunState.PENDING) and time.monotonic() < deadline:
            time.sleep(1.0)  # still being copied and started: stop it once every host runs it
            state = self.state()
        if state.terminal:
            raise RunError(f"run {self.run.id} is already {state.value}; nothing to cancel")
        if self.run.info.remote is None:  # its submitting process went away before any host had it
            self.run.transition(RunState.CANCELLED, reason="cancelled by `clustertune cancel` before it started")
            return
        self.run.update_remote(cancel_requested=True)
        self.stop_hosts(GRACEFUL_CANCEL_S)
        self.state()

    # -- results ---------------------------------------------------------------------------

    def _gather_once(self) -> None:
        if self.remote.get("gathered") or self.remote.get("keep_on_cluster") or not self.remote.get("started"):
            return
        try:
            gather(self.run)
        except ClusterError as exc:
            # The state is known; the results wait on the hosts for the next status/resume.
            print(f"clustertune: results of run {self.run.id} not brought back yet: {exc}", file=sys.stderr)
            return
        self.run.update_remote(gathered=True)


def gather(run: Run) -> None:
    """Copy every host's run directory back (newest copy of each file wins: rank 0 may have
    been on any host), then keep only the checkpoints rank 0 kept."""
    from clustertune.recipe.load import load_recipe
    from clustertune.remote.backend import cluster_of

    cluster = cluster_of(run)
    excludes = [f"--exclude={p}" for p in (*_LOCAL_ONLY, *_SCRATCH)]
    for i in _remote(run)["nodes"]:
        conn = cluster.conn(int(i))
        src = HostRunPaths(cluster.root(int(i)), run.id).run_dir
        conn.rsync(["-a", "--update", *excludes, conn.remote(src + "/"), f"{run.paths.root}/"])
    keep = load_recipe(run.paths.recipe).train.keep_last
    found = sorted(p for p in run.paths.checkpoints.glob("step-*") if p.is_dir()) if run.paths.checkpoints.is_dir() else []
    import shutil

    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


# What a finished run leaves behind, in the order `clustertune run` prints it.
_RESULTS = (("model", "model"), ("metrics", "metrics.jsonl"), ("checkpoints", "checkpoints"))


def kept_result_lines(run: Run) -> list[str]:
    """Where the results of a run kept on the cluster are: which host holds each (rank 0 may
    have been on any of them), its absolute path there, and the command that copies it here.
    Nothing is printed as a local path, since nothing was brought back."""
    from clustertune.remote.backend import cluster_of
    from clustertune.remote.transport import shell_join

    cluster = cluster_of(run)
    found: dict[str, list[tuple[int, str]]] = {}
    unreachable = []
    for i in (int(n) for n in _remote(run)["nodes"]):
        rdir = HostRunPaths(cluster.root(i), run.id).run_dir
        # One round trip: the absolute run directory, then those of the results it holds.
        try:
            r = cluster.conn(i).run(shell_join(["cd", rdir], "&&", ["pwd", "-P"], "&&",
                                               ["ls", "-d", "--", *(name for _, name in _RESULTS)], "2>/dev/null"))
        except ClusterError as exc:
            unreachable.append(f"  {cluster.hosts[i].label}: not listed now ({exc}); its results are under {rdir}")
            continue
        lines = r.text.splitlines()
        if not lines:
            continue  # no run directory there (removed by gc, or never started)
        for name in lines[1:]:
            found.setdefault(name, []).append((i, posixpath.join(lines[0], name)))
    out = [f"  results kept on cluster {cluster.name} (launch.keep_on_cluster):"]
    for label, name in _RESULTS:
        where = "; ".join(f"{path} on {cluster.hosts[i].label}" for i, path in found.get(name, [])) or "none written"
        out.append(f"  {label + ':':<13}{where}")
    out += unreachable
    holders = found.get("model") or found.get("metrics.jsonl")
    if holders:
        i, path = holders[0]
        conn = cluster.conn(i)
        src = conn.remote(posixpath.dirname(path) + "/")
        fetch = ["rsync", "-a", "--protect-args", "--exclude=/run.json", "-e", shlex.join(conn.plain_ssh()),
                 src, f"{run.paths.root}/"]
        out.append("  copy them here with: " + shlex.join(fetch))
    return out


def spread_checkpoints(run: Run) -> None:
    """Before a resume with results kept on the cluster: every host needs the newest checkpoint,
    which only rank 0's host wrote. It is relayed through this machine (hosts need not reach
    each other) and not kept here."""
    from clustertune.remote.backend import cluster_of

    cluster = cluster_of(run)
    nodes = [int(n) for n in _remote(run)["nodes"]]
    rdir = {i: HostRunPaths(cluster.root(i), run.id).run_dir for i in nodes}
    have: dict[int, set[str]] = {}
    for i in nodes:
        r = cluster.conn(i).run(["ls", posixpath.join(rdir[i], "checkpoints")])
        have[i] = {n for n in r.text.split() if n.startswith("step-")} if r.rc == 0 else set()
    newest = max((n for names in have.values() for n in names), default=None)
    if newest is None:
        return
    holder = next(i for i in nodes if newest in have[i])
    with tempfile.TemporaryDirectory(prefix="clustertune-ckpt-") as tmp:
        conn = cluster.conn(holder)
        conn.rsync(["-a", conn.remote(posixpath.join(rdir[holder], "checkpoints", newest) + "/"), f"{tmp}/{newest}/"])
        for i in nodes:
            if newest not in have[i]:
                c = cluster.conn(i)
                c.check_call(["mkdir", "-p", posixpath.join(rdir[i], "checkpoints")], what="creating checkpoints/")
                c.rsync(["-a", f"{tmp}/{newest}/", c.remote(posixpath.join(rdir[i], "checkpoints", newest) + "/")])


def before_resume(run: Run) -> None:
    """The last attempt's results where the next one finds them: gathered here (they travel
    back to every host with the run directory) or, when kept on the cluster, the newest
    checkpoint on every host."""
    job = SshJob(run)
    job.state()  # records how the last attempt ended and gathers its results (not kept on the cluster)
    if job.remote.get("keep_on_cluster"):
        spread_checkpoints(run)


class SshLauncher:
    """The ranks on the hosts of an SSH cluster; the run directory comes back when it ends."""

    name = BACKEND
    prepares_data_here = True

    def check(self, recipe: Recipe, plan: LaunchPlan) -> None:
        check_nodes(recipe.launch, len(find_cluster(str(recipe.launch.cluster)).hosts))

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        return dry_run_lines(plan, recipe.launch)

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None) -> SshJob:
        """Starts the ranks on the hosts and, with ``announce``, prints their lines until the run
        ends (Ctrl-C leaves it running there); returns once it ended."""
        job = submit(plan, run, recipe.launch)
        try:
            if announce is not None:
                procs = describe_procs(job.remote.get("procs_per_node") or [plan.procs_per_node or 1])
                announce(f"run {run.id}: {plan.nodes} host(s) of cluster {recipe.launch.cluster} x "
                         f"{procs} process(es); Ctrl-C leaves it running there")
                for line in job.follow():
                    announce(line)
            job.wait()
        except KeyboardInterrupt:
            if announce is not None:
                announce(f"run {run.id} goes on on the cluster: `clustertune logs {run.id} --follow`, "
                         f"`clustertune cancel {run.id}`")
            raise
        return job

    def job(self, run: Run) -> SshJob:
        return SshJob(run)
