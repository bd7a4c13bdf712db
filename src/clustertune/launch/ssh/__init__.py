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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from clustertune.data.manifest import MANIFEST, load_manifest
from clustertune.data.staging import read_run_data
from clustertune.errors import ClusterError, LaunchError
from clustertune.identity import CHECKPOINT_KEY_ENV, checkpoint_key
from clustertune.launch.base import Resuming, accept_checkpoint
from clustertune.launch.files import host_path, shipped, tree_files
from clustertune.launch.command import shown_line
from clustertune.runs.echo import shown_record
from clustertune.launch.plan import RDZV_PORT_BASE, RDZV_PORT_SPAN, LaunchPlan, node_command
from clustertune.recipe.local_paths import with_values
from clustertune.recipe.schema import LaunchSection, Recipe
from clustertune.remote.cluster import EXIT_MISSING, Cluster
from clustertune.remote.cloud import hold_autostop
from clustertune.remote.config import client_id, clusters_file, list_clusters
from clustertune.remote.envs import Env, folder_files, tree_hash
from clustertune.remote.runner_gpus import GPU_QUERY, parse_gpus
from clustertune.launch.ssh.results import SCRATCH, SshJob, attempt_key, spread_checkpoints, vouch_for_kept_checkpoint
from clustertune.remote.transport import shell_join
from clustertune.runs.job import Announce
from clustertune.runs.paths import CANCEL_FILE, FILES_DIR, FILES_ENV, STOP_FILE, HostRunPaths
from clustertune.runs.records import DataRef
from clustertune.runs.run import Run
from clustertune.runs.state import RunState

BACKEND = "ssh"


# -- which hosts, which commands (pure) ---------------------------------------------------------


def find_cluster(name: str) -> Any:
    """The configured cluster ``name``; an unknown one names the closest and how to add it."""
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


def rendezvous_port(key: str) -> int:
    """A port derived from the attempt key: every host computes the same one, and a new
    attempt never meets the stale rendezvous of an earlier one."""
    return RDZV_PORT_BASE + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % RDZV_PORT_SPAN


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


def _sync_workdir(cluster: Any, nodes: list[int]) -> list[str]:
    """This directory on each host (``.gitignore`` respected, under the host's root by its own
    name, as ``clustertune sync`` puts it); the absolute paths there."""
    out = []
    for i, dest in zip(nodes, cluster.sync(Path.cwd(), None, nodes)):
        r = cluster.conn(i).check_call(shell_join(["cd", dest], "&&", ["pwd", "-P"]), what=f"finding {dest}")
        out.append(r.text.strip().splitlines()[-1])
    return out


def env_for(plan: LaunchPlan, launch: LaunchSection) -> Any:
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
    pkg = Path(__file__).resolve().parents[2]  # clustertune/launch/ssh/__init__.py -> clustertune/
    files = folder_files(pkg)
    return pkg, files, tree_hash(pkg, files)


def _prepare_host(cluster: Any, i: int, run: Run, env: Any, data_ref: DataRef | None,
                  code: tuple[Path, list[str], str]) -> tuple[str, int]:
    """Env, code, data, the recipe's local files and run directory on host ``i``; returns the
    run directory there (absolute) and the bytes of local files sent."""
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
    if data_ref is None:  # a user's own command: no prepared data, just the run directory
        conn.rsync(["-a", *[f"--exclude={p}" for p in SCRATCH], f"{run.paths.root}/", conn.remote(abs_rdir + "/")])
        return abs_rdir, _files_to_host(cluster, i, run, root, abs_rdir)
    src = Path(data_ref.dir)
    man = load_manifest(src)
    data_dir = posixpath.join(root, "data", man.fingerprint)
    cluster.snapshot_to(i, src, data_dir, sorted([*man.files, MANIFEST]))
    conn.rsync(["-a", *[f"--exclude={p}" for p in SCRATCH], f"{run.paths.root}/", conn.remote(abs_rdir + "/")])
    # The host's data reference points at its own copy of the prepared data.
    host_ref = data_ref.model_copy(update={"dir": data_dir, "manifest": posixpath.join(data_dir, MANIFEST)})
    conn.check_call(shell_join(["cat"], ">", [posixpath.join(abs_rdir, run.paths.data.name)]),
                    input=(json.dumps(host_ref.to_json(), indent=2) + "\n").encode(), what="writing the host's data.json")
    return abs_rdir, _files_to_host(cluster, i, run, root, abs_rdir)


def _files_to_host(cluster: Any, i: int, run: Run, root: str, abs_rdir: str) -> int:
    """The run's local files on host ``i`` (``clustertune.launch.files``): each snapshot sent
    once per host and content and checked there (every file, by size), the host's recipe
    naming its own copies, and launch.files linked into the run's files/ folder. Returns the
    bytes sent."""
    placed = shipped(run)
    if not placed:
        return 0
    conn = cluster.conn(i)
    sent = 0
    for p in placed:
        local = Path(p.node)
        if not local.exists():
            raise LaunchError(f"{p.key}: the run's snapshot of {p.path} is gone from {local.parent} (the data cache "
                              "was cleaned?); start a new run")
        dest = posixpath.dirname(host_path(root, p))
        listing = [posixpath.join(p.name, f) if f else p.name for f in tree_files(local)]
        n = cluster.snapshot_to(i, local.parent, dest, listing)
        if n:
            try:
                _check_on_host(conn, local, host_path(root, p), p.key)
            except ClusterError:
                conn.run(["rm", "-rf", dest])  # sent anew next time, not taken as present
                raise
        sent += n
    values = {p.key: host_path(root, p) for p in placed if not p.extra}
    if values and not run.paths.is_command:
        plain = with_values(yaml.safe_load(run.paths.recipe.read_text(encoding="utf-8")), values)
        conn.check_call(shell_join(["cat"], ">", [posixpath.join(abs_rdir, run.paths.recipe.name)]),
                        input=yaml.safe_dump(plain, sort_keys=False).encode(), what="writing the host's recipe.yaml")
    extras = [p for p in placed if p.extra]
    if extras:
        folder = posixpath.join(abs_rdir, FILES_DIR)
        links = [["ln", "-sfn", host_path(root, p), posixpath.join(folder, p.name)] for p in extras]
        conn.check_call(shell_join(["mkdir", "-p", folder], *[x for ln in links for x in ("&&", ln)]),
                        what="linking launch.files into the run's files/ folder")
    return sent


def _check_on_host(conn: Any, local: Path, remote: str, key: str) -> None:
    """The host's copy has every file of the snapshot, each of the same size."""
    want = sorted(f"{f or '.'} {(local / f if f else local).stat().st_size}" for f in tree_files(local))
    if local.is_file():
        r = conn.check_call(["stat", "-c", "%s", remote], what=f"checking the copy of {key}")
        got = [f". {r.text.strip()}"]
    else:
        r = conn.check_call(["find", remote, "-type", "f", "-printf", "%P %s\\n"], what=f"checking the copy of {key}")
        got = sorted(line for line in r.text.splitlines() if line)
    if got != want:
        raise ClusterError(f"{key}: the copy on {conn.host.label} at {remote} differs from the snapshot sent "
                           f"({len(got)} file(s) against {len(want)}); run again (it is sent anew)")


@dataclass
class _NodeStart:
    """Starts one host's part of an attempt (called on a thread per host)."""

    cluster: Cluster
    plan: LaunchPlan
    run: Run
    key: str
    addresses: list[str]
    env: Env
    data_ref: DataRef | None
    code: tuple[Path, list[str], str]
    workdirs: list[str]
    ckpt_key: str
    nodes: list[int]  # the hosts, by node rank

    def __call__(self, i: int) -> dict[str, Any]:
        """Host ``i``'s part: node rank ``nodes.index(i)``."""
        rank = self.nodes.index(i)
        nproc = procs_on_host(self.plan, [] if self.plan.procs_per_node else host_gpus(self.cluster, i))
        abs_rdir, sent = _prepare_host(self.cluster, i, self.run, self.env, self.data_ref, self.code)
        # A user's command runs elsewhere than the run directory: {run_dir} in its arguments is
        # the host's own, absolute (a recipe's ranks start in it and name it ".").
        plan = replace(self.plan, run_dir=abs_rdir) if self.plan.command else self.plan
        argv = node_command(plan, rank, self.addresses, rendezvous_port(self.key), self.key, nproc)
        root = posixpath.dirname(posixpath.dirname(abs_rdir))
        runtime = self.env.runtime_vars()  # plan env plus pass-through values: on stdin, never argv
        cwd = abs_rdir
        if not self.plan.command:
            # The ranks sign the run's checkpoints, and check them before loading, with this
            # user's checkpoint key (on stdin like the secrets above; never stored on the host).
            runtime[CHECKPOINT_KEY_ENV] = self.ckpt_key
        if self.plan.command:
            cwd = self.workdirs[rank] if self.workdirs else abs_rdir
            runtime.update(CLUSTERTUNE_RUN_DIR=abs_rdir, CLUSTERTUNE_ATTEMPT=str(len(self.run.attempts)),
                           CLUSTERTUNE_NODE_RANK=str(rank), CLUSTERTUNE_MASTER_ADDR=self.addresses[0],
                           CLUSTERTUNE_MASTER_PORT=str(rendezvous_port(self.key)))
        if FILES_ENV in runtime:  # launch.files, wherever the command starts
            runtime[FILES_ENV] = posixpath.join(abs_rdir, FILES_DIR)
        # The code snapshot first on the path: the run uses the code as it was when submitted.
        runtime["PYTHONPATH"] = ":".join(p for p in (posixpath.join(root, "code", f"clustertune-{self.code[2]}"),
                                                     runtime.get("PYTHONPATH")) if p)
        # launch.env values expand their $NAME references on the host (as in a SLURM script).
        header = {"argv": argv, "cwd": cwd, "env": runtime, "client": client_id(),
                  "expand_env": [k for k, _ in self.plan.env]}
        _, py = self.cluster.env_python(i, self.env)
        cmd = shell_join(["test", "-f", self.cluster.runner_path(i)], "||", f"exit {EXIT_MISSING};",
                         [py, self.cluster.runner_path(i), "start", self.cluster.root(i), self.key, "--kind", "exec"])
        payload = json.dumps(header).encode() + b"\n"
        r = self.cluster.run_or_repair(i, cmd, input=payload)
        if r.rc != 0:
            raise ClusterError(f"{self.cluster.hosts[i].label}: could not start attempt {self.key} (exit {r.rc}): {r.err.strip()[-1500:]}")
        return {**json.loads(r.text.strip().splitlines()[-1]), "procs": nproc, "files_sent": sent}


def submit(plan: LaunchPlan, run: Run, launch: LaunchSection) -> SshJob:
    """Start the next attempt of ``run`` on the cluster's first ``plan.nodes`` hosts; returns at once."""
    cluster = find_cluster(str(launch.cluster))
    check_nodes(launch, len(cluster.hosts))
    nodes = list(plan.hosts) or list(range(plan.nodes))
    if len(nodes) != plan.nodes or not all(0 <= i < len(cluster.hosts) for i in nodes):
        raise LaunchError(f"hosts {nodes} of cluster {cluster.name!r} ({len(cluster.hosts)} host(s)) for launch.nodes={plan.nodes}")
    hosts = [cluster.hosts[i] for i in nodes]
    key = attempt_key(run.id, len(run.attempts) + 1)
    addresses = [h.address for h in hosts]
    data_ref = None if plan.command else read_run_data(run.paths)
    code = _code_files()
    # A user's own command runs in this directory mirrored to each host, as `clustertune sync` does.
    workdirs = _sync_workdir(cluster, nodes) if plan.command and launch.sync_workdir else []
    run.set_remote({
        "cluster": cluster.name, "kind": "train", "nodes": nodes, "client": client_id(),
        "hosts": [h.to_dict() for h in cluster.hosts], "key": key, "keep_on_cluster": launch.keep_on_cluster,
        "rendezvous": f"{hosts[0].address}:{rendezvous_port(key)}", "env_vars": sorted(plan.env_passthrough),
        "gathered": False,
    })
    # Opened (PENDING) before the copy: every host's run.json then shows this attempt open, and
    # the node entry on global rank 0 records how it ends. RUNNING once every host has started.
    run.start_attempt(job_id=key, state=RunState.PENDING)

    start = _NodeStart(cluster, plan, run, key, addresses, env_for(plan, launch), data_ref, code, workdirs,
                       checkpoint_key().hex(), nodes)
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
    run.update_remote(started=True, procs_per_node=[a["procs"] for a in answers],
                      files_sent_bytes=[a["files_sent"] for a in answers])
    run.transition(RunState.RUNNING)
    hold = hold_autostop(cluster, key, run.id)  # cloud clusters with autostop only
    if hold is not None:
        run.update_remote(autostop_hold=hold)
    return SshJob(run)


class SshLauncher:
    """The ranks on the hosts of an SSH cluster; the run directory comes back when it ends."""

    name = BACKEND
    prepares_data_here = True

    def check(self, recipe: Recipe, plan: LaunchPlan, resuming: Resuming | None = None) -> None:
        check_nodes(recipe.launch, len(find_cluster(str(recipe.launch.cluster)).hosts))
        if resuming is None:
            return
        # launch() asked the run's job how its last attempt ended, which gathered its results here.
        run = resuming.run
        if run.info.backend == BACKEND and (run.info.remote or {}).get("keep_on_cluster"):
            # The checkpoints stayed on the hosts: the newest onto every host, and its signature checked.
            spread_checkpoints(run)
            vouch_for_kept_checkpoint(run, resuming.trust_checkpoint)
        accept_checkpoint(resuming)

    def describe(self, plan: LaunchPlan, recipe: Recipe) -> list[str]:
        return dry_run_lines(plan, recipe.launch)

    def submit(self, plan: LaunchPlan, run: Run, recipe: Recipe, announce: Announce | None = None,
               show_progress: bool = True, wait: bool = True) -> SshJob:
        """Starts the ranks on the hosts and, with ``announce``, prints their lines until the run
        ends (Ctrl-C leaves it running there); returns once it ended, or (``wait=False``) once
        every host started its part."""
        job = submit(plan, run, recipe.launch)
        if not wait:
            return job
        try:
            if announce is not None:
                procs = describe_procs(job.remote.get("procs_per_node") or [plan.procs_per_node or 1])
                announce(f"run {run.id}: {plan.nodes} host(s) of cluster {recipe.launch.cluster} x "
                         f"{procs} process(es); Ctrl-C leaves it running there")
                for line in job.follow():
                    if not plan.command:
                        shown = shown_record(line)
                    elif plan.runner != "none":
                        shown = shown_line(line, recipe.launch.tee)
                    else:
                        shown = line  # the command's own processes: the node's output is theirs
                    if shown is not None:
                        announce(shown)
            job.wait()
        except KeyboardInterrupt:
            if announce is not None:
                announce(f"run {run.id} goes on on the cluster: `clustertune logs {run.id} --follow`, "
                         f"`clustertune cancel {run.id}`")
            raise
        return job

    def job(self, run: Run) -> SshJob:
        return SshJob(run)
