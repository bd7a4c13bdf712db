"""LaunchPlan: what to start where, as pure data, built by a pure function of the recipe.

Every backend renders from a plan (the local torchrun command, the sbatch script, the ssh
commands), so the golden-file tests of rendered jobs need no cluster. Nothing here imports
torch or touches the filesystem: the launching process stays cheap to start.

The per-node command is a function of (node rank, node addresses): torchrun's c10d rendezvous
needs only the first node's address, a port and an id shared by the nodes, so every node runs
the same command and ranks are assigned by the rendezvous, never computed on the submitting host.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from clustertune.recipe.launch_checks import gres_gpus, secret_looking
from clustertune.runs.paths import FILES_DIR, FILES_ENV
from clustertune.script.stage import STAGE_ENV
from clustertune.recipe.schema import LaunchSection, Recipe

# The node-side entry point; it reads everything else from the run directory.
ENTRY_MODULE = "clustertune.train.entry"
# A user's own command runs under this wrapper on each rank (or node): logs, stop requests.
SCRIPT_MODULE = "clustertune.script.rank"
# Variables every job gets: offline-safe tokenizers, no thread oversubscription across ranks.
BASE_ENV: dict[str, str] = {"TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


# SLURM options that, left unset, the cluster fills in (the dry run says so).
SITE_DEFAULT_KEYS = ("partition", "time", "account", "qos", "mem")

# SlurmOptions fields whose launch key has another name.
SLURM_KEY_OF = {"extra": "sbatch_extra"}


@dataclass(frozen=True)
class SlurmOptions:
    """The scheduler's part of a plan: each maps to one ``#SBATCH`` flag."""

    gpus_per_node: int = 0
    gpus_per_task: int | None = None
    gres: str | None = None
    gpu_type: str | None = None
    cpus_per_gpu: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    tmp_disk: str | None = None
    time: str | None = None
    job_name: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    dependency: str | None = None
    signal: str = "B:USR2@90"
    extra: tuple[str, ...] = ()
    max_requeues: int = 3

    @classmethod
    def from_launch(cls, ln: LaunchSection) -> SlurmOptions:
        """Each option is the ``launch`` key of the same name (``extra``: ``launch.sbatch_extra``);
        the recipe schema documents and validates them, this only carries them into the plan."""
        values = {f.name: getattr(ln, SLURM_KEY_OF.get(f.name, f.name)) for f in fields(cls)}
        return cls(**{**values, "extra": tuple(values["extra"])})

    @property
    def gpus(self) -> int | None:
        """GPUs per node asked for (one task per node), None when the job asks for none."""
        if self.gpus_per_node or self.gpus_per_task:
            return self.gpus_per_node or self.gpus_per_task
        return gres_gpus(self.gres) if self.gres else None

    @property
    def step_cpus(self) -> int | None:
        """CPUs the training step asks for: srun does not inherit the job's --cpus-per-task
        (SLURM 22.05 and later), so without it every rank of a node shares one core."""
        if self.cpus_per_task:
            return self.cpus_per_task
        return self.cpus_per_gpu * self.gpus if self.cpus_per_gpu and self.gpus else None


@dataclass(frozen=True)
class LaunchPlan:
    """One job: ``nodes`` x ``procs_per_node`` ranks of the node entry on ``run_dir``."""

    run_id: str
    run_dir: str
    backend: str
    nodes: int
    procs_per_node: int | None  # None: resolved on each node (its GPUs, else 1)
    python: str
    env: tuple[tuple[str, str], ...] = ()
    env_passthrough: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    rdzv_timeout: int = 900
    max_restarts: int = 0
    node_address_suffix: str | None = None
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    command: tuple[str, ...] = ()
    """A user's own command (``clustertune launch``) instead of the recipe's node entry."""
    runner: str = "torchrun"
    """``torchrun``: the command is every rank; ``none``: it runs once per node; ``srun``: every
    rank is a SLURM task."""
    prepare: tuple[str, ...] = ()
    """``launch.prepare`` as an argv (a shell line as ``bash -c LINE``): run once, on the first
    node, before the command and its ``launch.stage`` copies."""
    hosts: tuple[int, ...] = ()
    """SSH: which of the cluster's hosts (their indices) the job runs on, in node-rank order; by
    default its first ``nodes``. A sweep spreads its trials over the hosts with it."""

    @property
    def multi_process(self) -> bool:
        return self.nodes > 1 or (self.procs_per_node or 1) > 1 or self.backend != "local"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["env"] = dict(self.env)
        if not self.command:  # a recipe's plan reads as it always did
            del d["command"], d["runner"]
        if not self.prepare:
            del d["prepare"]
        if not self.hosts:
            del d["hosts"]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def build_plan(recipe: Recipe, run_id: str, run_dir: str, python: str,
               command: list[str] | tuple[str, ...] = ()) -> LaunchPlan:
    """The plan for ``recipe`` run in ``run_dir`` with the interpreter ``python`` (pure); with
    ``command``, the plan of a user's own command under the recipe's ``launch`` section."""
    ln = recipe.launch
    env = dict(BASE_ENV)
    if command:
        env.update(script_env(run_id, run_dir, ln.nodes, ln.stop_grace_seconds))
        if ln.stage:
            env[STAGE_ENV] = json.dumps(ln.stage)  # the rank wrapper copies them (clustertune.script.stage)
    if recipe.train.cpu_threads:
        # Each rank sets torch's threads itself; OMP's default (all cores per rank) oversubscribes.
        env["OMP_NUM_THREADS"] = str(recipe.train.cpu_threads)
    if recipe.train.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # torch then finds no GPU, on every node and rank
    if ln.files:
        # Setup lines and the user's own command find launch.files here (the ranks are told again).
        env[FILES_ENV] = posixpath.join(run_dir, FILES_DIR)
    if ln.nccl_socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = ln.nccl_socket_ifname
    if ln.max_restarts:
        # torchrun's agent shares its rendezvous TCPStore with the workers by default; workers it
        # restarts then read the previous attempt's gloo/NCCL addresses from that store and fail
        # to connect (pytorch/pytorch#135712). With sharing off, each attempt gets a fresh store.
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env.update(ln.env)
    return LaunchPlan(
        run_id=run_id,
        run_dir=run_dir,
        backend=ln.backend,
        nodes=ln.nodes,
        procs_per_node=ln.procs_per_node,
        python=python,
        env=tuple(sorted(env.items())),
        env_passthrough=tuple(sorted(set(ln.env_passthrough))),
        setup=tuple(ln.setup),
        rdzv_timeout=ln.rdzv_timeout,
        max_restarts=ln.max_restarts,
        node_address_suffix=ln.node_address_suffix,
        slurm=SlurmOptions.from_launch(ln),
        command=tuple(command),
        runner=ln.runner if command else "torchrun",
        prepare=prepare_argv(ln.prepare) if command else (),
    )


def prepare_argv(prepare: str | list[str] | None) -> tuple[str, ...]:
    """``launch.prepare`` as the argv that runs it: a list as it is, a string as a bash line."""
    if prepare is None:
        return ()
    return ("/bin/bash", "-c", prepare) if isinstance(prepare, str) else tuple(prepare)


# In launch.env values: $NAME and ${NAME} expand where the job runs; $$ is a literal $.
ENV_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_env_value(value: str, environ: dict[str, str]) -> str:
    """A launch.env value with its references filled in from ``environ`` (unset: empty, as
    the shell does); what the SLURM script's double-quoted rendering gives on the node."""
    def sub(m: re.Match[str]) -> str:
        return "$" if m.group() == "$$" else environ.get(m.group(1) or m.group(2), "")
    return ENV_REFERENCE.sub(sub, value)


def shell_expanding_quote(value: str) -> str:
    """``value`` in double quotes for bash, where only $NAME/${NAME} expand: every other
    character that bash would interpret inside double quotes is escaped."""
    if "$" not in value:
        return shlex.quote(value)  # nothing to expand: the plainest quoting

    def lit(text: str) -> str:
        return re.sub(r'([\\"$`])', r"\\\1", text)
    out, pos = [], 0
    for m in ENV_REFERENCE.finditer(value):
        out += [lit(value[pos:m.start()]), "\\$" if m.group() == "$$" else m.group()]
        pos = m.end()
    return '"' + "".join([*out, lit(value[pos:])]) + '"'


def env_references(value: str) -> list[str]:
    """The variables a launch.env value names (``$NAME``, ``${NAME}``; ``$$`` names none)."""
    return [m.group(1) or m.group(2) for m in ENV_REFERENCE.finditer(value) if m.group() != "$$"]


@dataclass(frozen=True)
class NodeExpansion:
    """What each node of a multi-node job sets again for itself: ``expand``, the plan's env
    values that name variables, expanded in the step the node runs (``$SLURM_NODEID``,
    ``$SLURM_TMPDIR``, ``$SLURMD_NODENAME`` are that node's own), in the sorted order the job exported
    them first. ``restore``: the plan's own names such a value reads before they are set in that
    order (``A: $B/x`` reads ``B`` unset): each node starts them from their value before
    launch.env (and sets them again in order), so it expands what the first node expanded. A value
    that names itself (``PATH: $HOME/bin:$PATH``) is expanded once, on the first node: srun hands
    every node its result, and expanding it again would add to it twice."""

    expand: tuple[tuple[str, str], ...] = ()
    restore: tuple[str, ...] = ()


def node_expansion(plan: LaunchPlan) -> NodeExpansion:
    """The plan's :class:`NodeExpansion` (pure)."""
    refs = {k: env_references(v) for k, v in plan.env}
    # PATH: $HOME/bin:$PATH adds to what is there, and srun hands each node the first node's
    # result (with what the setup lines added after it): expanded again, it would add twice.
    own = {k for k, names in refs.items() if k in names}
    restore = sorted({n for k, names in refs.items() for n in names if n in refs and n > k and n not in own})
    # A restored name is set again too, at its place in the order, even when its value is plain.
    expand = tuple((k, v) for k, v in plan.env if k not in own and (refs[k] or k in restore))
    return NodeExpansion(expand=expand, restore=tuple(restore))


def script_env(run_id: str, run_dir: str, nodes: int, grace: int) -> dict[str, str]:
    """What a user's command learns from its environment (``clustertune.script`` reads it); the
    attempt number and the node's rendezvous host are added where they are known."""
    return {
        "CLUSTERTUNE_RUN_ID": run_id,
        "CLUSTERTUNE_RUN_DIR": run_dir,
        "CLUSTERTUNE_STOP_GRACE": str(grace),
        "CLUSTERTUNE_NNODES": str(nodes),
    }


def secret_looking_env(plan: LaunchPlan) -> list[str]:
    """Names in the plan's env that look like secrets (they belong in env_passthrough)."""
    return [k for k, _ in plan.env if secret_looking(k)]


def torchrun_args(plan: LaunchPlan, nproc: int | str) -> list[str]:
    """torchrun's arguments shared by every node (without the rendezvous endpoint and id)."""
    return [
        plan.python, "-m", "torch.distributed.run",
        f"--nnodes={plan.nodes}",
        f"--nproc-per-node={nproc}",
        f"--max-restarts={plan.max_restarts}",
    ]


def entry_args(plan: LaunchPlan) -> list[str]:
    """What torchrun starts as each rank: the recipe's node entry, or the user's command
    under its wrapper."""
    if plan.command:
        return ["-m", SCRIPT_MODULE, *plan.command]
    return ["-m", ENTRY_MODULE, plan.run_dir]


def per_node_args(plan: LaunchPlan) -> list[str]:
    """``launch.runner: none``: the argv each node runs once (placeholders filled there)."""
    return [plan.python, "-m", SCRIPT_MODULE, "--per-node", *plan.command]


def srun_rank_args(plan: LaunchPlan) -> list[str]:
    """``launch.runner: srun``: the argv each SLURM task (one rank) runs."""
    return [plan.python, "-m", SCRIPT_MODULE, "--slurm-ranks", *plan.command]


# A multi-node rendezvous port is derived, not asked for, so every node computes the same one. It
# stays below Linux's ephemeral range (32768-60999 by default, net.ipv4.ip_local_port_range): a
# port there may be held by any process that bound port 0 or opened a connection, and torchrun's
# agents then join that stranger's socket instead of hosting the store, and wait until
# join_timeout (a 2-host run on loopback hung so beside an in-process test's TCP store at 37357).
RDZV_PORT_BASE, RDZV_PORT_SPAN = 20000, 12000


# rdzv_port and rdzv_id define what the sbatch script computes in shell (sbatch.py); the tests hold the script to them.
def rdzv_port(job_id: int) -> int:
    """A port derived from the job id, so concurrent jobs on shared nodes rarely collide."""
    return RDZV_PORT_BASE + job_id % RDZV_PORT_SPAN


def rdzv_id(job_id: str, restart: int) -> str:
    """Fresh per restart: a requeued job must never join the stale rendezvous of its first run."""
    return f"{job_id}-{restart}"


def node_command(plan: LaunchPlan, node_rank: int, addresses: list[str], port: int, run_key: str,
                 nproc: int) -> list[str]:
    """The argv that node ``node_rank`` runs, given every node's address (first = rendezvous host).

    Every node runs the same command: the c10d rendezvous on ``addresses[0]`` assigns ranks.
    ``node_rank`` is checked, not used, so a backend cannot start more nodes than planned.
    """
    assert 0 <= node_rank < plan.nodes == len(addresses), (node_rank, plan.nodes, addresses)
    if plan.command and plan.runner == "none":
        return per_node_args(plan)
    if plan.nodes == 1:
        # One host: torchrun picks a free port and a private rendezvous itself.
        rdzv = ["--standalone"]
    else:
        rdzv = [
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={addresses[0]}:{port}",
            f"--rdzv-id={run_key}",
            f"--rdzv-conf=join_timeout={plan.rdzv_timeout},read_timeout={min(plan.rdzv_timeout, 60)}",
        ]
    return [*torchrun_args(plan, nproc), *rdzv, *entry_args(plan)]
