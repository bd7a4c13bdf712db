"""The SLURM batch script, rendered by pure functions from the launch plan (golden-file tests
need no cluster), and the ``sbatch`` command line that submits it. What differs per node or per
attempt (the rendezvous host and port, the rendezvous id) is computed by the script on the node
at run time, never here; see :mod:`clustertune.launch.slurm` for the backend around it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from clustertune.errors import LaunchError
from clustertune.launch.plan import (RDZV_PORT_BASE, RDZV_PORT_SPAN, LaunchPlan, entry_args, node_expansion, per_node_args, shell_expanding_quote,
                                     srun_rank_args, torchrun_args)
from clustertune.runs.paths import CANCEL_FILE, LOGS_DIR, PREPARE_LOG, PREPARED_FILE, STOP_FILE, node_log_name

SCRIPT_NAME = "job.sbatch"
# A launch.env name's value before launch.env set it, kept for each node's own expansion.
BEFORE_ENV = "CT_ENV_BEFORE_"
# Per-node logs: srun's %n is the node's index within the job.
NODE_LOG = node_log_name("%n")  # SLURM fills in the node id


def batch_log_name(job_id: str = "%j") -> str:
    return f"slurm-{job_id}.out"


def srun_ranks_per_node(plan: LaunchPlan) -> int | None:
    """``launch.runner: srun``: the SLURM tasks (ranks) per node, fixed when the job is
    submitted: ``procs_per_node``, else one per GPU asked for, else 1. None for other runners."""
    if not (plan.command and plan.runner == "srun"):
        return None
    return plan.procs_per_node or plan.slurm.gpus or 1


def job_name(plan: LaunchPlan) -> str:
    """The name ``squeue`` shows: ``launch.job_name``, else ``ct-<run id>``."""
    return plan.slurm.job_name or f"ct-{plan.run_id}"


def sbatch_flags(plan: LaunchPlan) -> list[str]:
    """The ``#SBATCH`` flags, sorted; values are the user's (SLURM parses these lines itself)."""
    s = plan.slurm
    flags: dict[str, str | None] = {
        # The submitting environment travels with the job: env_passthrough values (secrets)
        # reach the ranks this way, never through the script. Explicit, as sites may change the default.
        "--export": "ALL",
        "--job-name": job_name(plan),
        "--nodes": str(plan.nodes),
        # One torchrun agent per node, which starts the ranks; under runner srun, one task per rank.
        "--ntasks-per-node": str(srun_ranks_per_node(plan) or 1),
        "--open-mode": "append",  # a requeued job appends to its logs
        "--requeue": None,
        "--signal": s.signal,
        "--time": s.time,
        "--partition": s.partition,
        "--account": s.account,
        "--qos": s.qos,
        "--constraint": s.constraint,
        "--dependency": s.dependency,
        "--mem": s.mem,
        "--tmp": s.tmp_disk,
        # Exactly what the recipe asks for (the schema refuses the pairs sbatch refuses).
        "--cpus-per-task": str(s.cpus_per_task) if s.cpus_per_task else None,
        "--cpus-per-gpu": str(s.cpus_per_gpu) if s.cpus_per_gpu else None,
        "--gres": s.gres,
    }
    typed = f"{s.gpu_type}:" if s.gpu_type else ""
    if s.gpus_per_node:
        flags["--gpus-per-node"] = f"{typed}{s.gpus_per_node}"
    if s.gpus_per_task:
        flags["--gpus-per-task"] = f"{typed}{s.gpus_per_task}"
    lines = sorted(f"{k}={v}" if v is not None else k for k, v in flags.items() if v is not None or k == "--requeue")
    return lines + list(s.extra)


def _check_sbatch_value(flag: str) -> None:
    # One #SBATCH line per flag: a newline would smuggle a shell line into the script.
    if "\n" in flag or "\r" in flag:
        raise LaunchError(f"launch: the sbatch option {flag!r} contains a line break")


def render_sbatch(plan: LaunchPlan) -> str:
    """The batch script for ``plan`` (a pure function: same plan, same text)."""
    flags = sbatch_flags(plan)
    for f in flags:
        _check_sbatch_value(f)
    source = "launch section and command" if plan.command else "recipe"
    lines = ["#!/bin/bash", *(f"#SBATCH {f}" for f in flags), f"# clustertune run {plan.run_id}: generated from its {source}.", ""]
    lines += _env_lines(plan) + _stop_and_rendezvous_lines(plan) + _data_lines(plan) + _train_lines(plan)
    return "\n".join(lines) + "\n"


def _env_lines(plan: LaunchPlan) -> list[str]:
    q = shlex.quote
    # No `set -u`/`-e` for the script as a whole: it checks the exit codes it acts on.
    lines = [f"CT_RUN_DIR={q(plan.run_dir)}", f"CT_STOP_FILE=\"$CT_RUN_DIR\"/{q(STOP_FILE)}",
             f"CT_MAX_REQUEUES={plan.slurm.max_requeues}", ""]
    again = node_expansion(plan)
    if again.restore:
        lines += ["# launch.env's own names that its values read, as they were before it: each node's step starts from them.",
                  *(f'export {BEFORE_ENV}{n}="${{{n}-}}"' for n in again.restore)]
    # launch.env: $NAME/${NAME} expand on the node ($SCRATCH/hf), nothing else is interpreted.
    lines += [f"export {k}={shell_expanding_quote(v)}" for k, v in plan.env]
    if again.expand:
        lines += ["# launch.env values that name variables expand again in every srun step, on the node that runs it:",
                  "# $SLURM_NODEID, $SLURM_TMPDIR are that node's own there (srun hands on this node's values).",
                  f"CT_NODE_ENV={q(node_env_script(plan))}"]
    if plan.env_passthrough:
        lines.append("# passed through from the submitting environment (values never written here): "
                     + " ".join(plan.env_passthrough))
    lines += ["", 'step() { echo "[$(date -u +%Y-%m-%dT%H:%M:%SZ)] $*"; }', ""]
    if plan.setup:
        # A failed `module load` or activation must stop the job, not train in the wrong env.
        lines += ['step "setup"', "set -e",
                  """trap 'CT_RC=$?; step "setup: a line failed with code $CT_RC (launch.setup); stopping"' ERR""",
                  *plan.setup, "trap - ERR", "set +e", ""]
    lines += [f"if ! [ -x {q(plan.python)} ]; then",
              f'  step "this node cannot run "{q(plan.python)}" (the submitting Python): the nodes must see '
              'it at the same path (a shared filesystem)"',
              "  exit 2", "fi", ""]
    return lines


def node_env_script(plan: LaunchPlan) -> str:
    """The shell text each srun step runs first (``CT_NODE_ENV``): the launch.env values that
    name variables, exported again in the job's sorted order from the values their names had
    before launch.env, so each node expands exactly what the first node did, with its own values."""
    again = node_expansion(plan)
    return "; ".join([*(f'{n}="${BEFORE_ENV}{n}"' for n in again.restore),
                      *(f"export {k}={shell_expanding_quote(v)}" for k, v in again.expand)])


def on_each_node(plan: LaunchPlan, argv: str) -> str:
    """``argv`` (shell text) as an srun step runs it: after the node's own ``CT_NODE_ENV``."""
    if not node_expansion(plan).expand:
        return argv
    return f'/bin/bash -c "$CT_NODE_ENV"\'; exec "$@"\' ct-node {argv}'


def _stop_and_rendezvous_lines(plan: LaunchPlan) -> list[str]:
    q = shlex.quote
    if plan.node_address_suffix:
        host = f'CT_RDZV_HOST="${{CT_FIRST_NODE}}"{q(plan.node_address_suffix)}'
    else:
        host = ('CT_RDZV_HOST=$(scontrol show node "$CT_FIRST_NODE" | tr " " "\\n" | sed -n "s/^NodeAddr=//p" | head -n 1)\n'
                'CT_RDZV_HOST=${CT_RDZV_HOST:-$CT_FIRST_NODE}')
    lines = [
        "# A stop request (time limit: USR2; preemption: TERM) goes to the ranks through the stop file.",
        "CT_STOP_SIGNAL=''",
        'rm -f "$CT_STOP_FILE" "$CT_RUN_DIR"/' + q(CANCEL_FILE) + "  # left by an earlier attempt",
        'ct_stop() { CT_STOP_SIGNAL=$1; step "received SIG$1: asking the ranks to checkpoint and stop"; echo "$1" > "$CT_STOP_FILE"; }',
        "trap 'ct_stop USR2' USR2",
        "trap 'ct_stop TERM' TERM",
        "",
        "CT_RESTART=${SLURM_RESTART_COUNT:-0}",
        'CT_FIRST_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        host,
        f'export PET_RDZV_ENDPOINT="$CT_RDZV_HOST:$(({RDZV_PORT_BASE} + SLURM_JOB_ID % {RDZV_PORT_SPAN}))"',
        'export PET_RDZV_ID="$SLURM_JOB_ID-$CT_RESTART"',
    ]
    if not plan.procs_per_node:
        # Not nvidia-smi: it lists every GPU of the node whatever CUDA_VISIBLE_DEVICES says, so a
        # site without device cgroups would start more ranks than GPUs allocated.
        lines += ["# Ranks per node: one per GPU SLURM allocated on this node, else what the recipe asked.",
                  f"CT_NPROC=${{SLURM_GPUS_ON_NODE:-{plan.slurm.gpus or 1}}}",
                  'if ! [ "$CT_NPROC" -ge 1 ] 2>/dev/null; then CT_NPROC=1; fi']
    return lines


def _data_lines(plan: LaunchPlan) -> list[str]:
    q = shlex.quote
    if plan.command:
        return _command_lines(plan)
    cpus = f" --cpus-per-task={plan.slurm.step_cpus}" if plan.slurm.step_cpus else ""
    return [
        "# Data: prepared once, as this job's first step (a cache hit if any run prepared it before);",
        "# a requeued job, or one whose data was prepared before submitting (launch.prepare_data), has it.",
        'if [ ! -f "$CT_RUN_DIR"/data.json ]; then',
        '  step "data: prepare (one task)"',
        f'  srun --nodes=1 --ntasks=1{cpus} --open-mode=append --output="$CT_RUN_DIR"/logs/data.log '
        + on_each_node(plan, f'{q(plan.python)} -m clustertune.data.job_step "$CT_RUN_DIR"'),
        '  CT_RC=$?',
        '  if [ "$CT_RC" != 0 ]; then step "data: failed with code $CT_RC (logs/data.log)"; exit "$CT_RC"; fi',
        '  step "data: ready"',
        "fi",
    ]


def _command_lines(plan: LaunchPlan) -> list[str]:
    """A user's own command: what it learns of this attempt and of the nodes (no data step),
    and ``launch.prepare`` before it."""
    return [
        "# Your own command: its attempt (1 + earlier attempts + requeues), and for launch.runner=none",
        "# the values of {master_addr} and {master_port} (each node's {node_rank} is its SLURM_NODEID).",
        'export CLUSTERTUNE_ATTEMPT=$(( ${CT_FIRST_ATTEMPT:-1} + CT_RESTART ))',
        'export CLUSTERTUNE_MASTER_ADDR="$CT_RDZV_HOST" CLUSTERTUNE_MASTER_PORT="${PET_RDZV_ENDPOINT##*:}"',
        *_prepare_lines(plan),
    ]


def _prepare_lines(plan: LaunchPlan) -> list[str]:
    """``launch.prepare``: one task on the first node, before the command's step (whose first
    process on each node then copies launch.stage's paths); once per run, as the data step."""
    if not plan.prepare:
        return []
    q = shlex.quote
    cpus = f" --cpus-per-task={plan.slurm.step_cpus}" if plan.slurm.step_cpus else ""
    log = f'"$CT_RUN_DIR"/{LOGS_DIR}/{PREPARE_LOG}'
    return [
        "# launch.prepare: once, on the first node, before the command starts and launch.stage copies its paths;",
        "# a requeued or resumed attempt finds it done.",
        f'if [ ! -f "$CT_RUN_DIR"/{PREPARED_FILE} ]; then',
        '  step "prepare: one task on the first node (launch.prepare)"',
        f'  srun --nodes=1 --ntasks=1 --relative=0{cpus} --open-mode=append --output={log} '
        + on_each_node(plan, " ".join(map(q, plan.prepare))),
        '  CT_RC=$?',
        f'  if [ "$CT_RC" != 0 ]; then step "prepare: failed with code $CT_RC ({LOGS_DIR}/{PREPARE_LOG})"; exit "$CT_RC"; fi',
        f'  touch "$CT_RUN_DIR"/{PREPARED_FILE}',
        '  step "prepare: done"',
        "fi",
    ]


def _train_lines(plan: LaunchPlan) -> list[str]:
    q = shlex.quote
    nproc = str(plan.procs_per_node) if plan.procs_per_node else "$CT_NPROC"
    torchrun = " ".join([*map(q, torchrun_args(plan, 0)[:-2]), f"--nproc-per-node={nproc}", *map(q, torchrun_args(plan, 0)[-1:]),
                         "--rdzv-backend=c10d", q(rdzv_conf(plan)),
                         *map(q, entry_args(plan))])
    # srun no longer inherits the job's --cpus-per-task (SLURM 22.05): without it, all the
    # ranks of a node would share one core.
    cpus = f" --cpus-per-task={plan.slurm.step_cpus}" if plan.slurm.step_cpus else ""
    if plan.command and plan.runner == "none":
        torchrun = " ".join(map(q, per_node_args(plan)))
    ranks = srun_ranks_per_node(plan)
    tasks = f"--ntasks-per-node=1 --ntasks={plan.nodes}"
    if ranks:
        # Every rank a SLURM task: the wrapper maps SLURM's task variables onto torchrun's.
        torchrun = " ".join(map(q, srun_rank_args(plan)))
        tasks = f"--ntasks-per-node={ranks} --ntasks={plan.nodes * ranks}"
        per_rank = plan.slurm.cpus_per_task or plan.slurm.cpus_per_gpu  # a rank per GPU: a GPU's CPUs
        cpus = f" --cpus-per-task={per_rank}" if per_rank else ""
    # A recipe is done when its summary is written; a command when it exits 0 unasked.
    done = '[ -z "$CT_STOP_SIGNAL" ]' if plan.command else '[ -f "$CT_RUN_DIR/summary.json" ]'
    return [
        'step "train: job $SLURM_JOB_ID (restart $CT_RESTART) on $SLURM_JOB_NODELIST, rendezvous $PET_RDZV_ENDPOINT"',
        f'srun --kill-on-bad-exit=1 {tasks}{cpus} --open-mode=append '
        f'--output="$CT_RUN_DIR"/logs/{NODE_LOG} \\\n  {on_each_node(plan, torchrun)} &',
        "CT_PID=$!",
        "# bash runs a trap only between commands: wait again after each signal until srun is gone.",
        'while true; do wait "$CT_PID"; CT_RC=$?; kill -0 "$CT_PID" 2>/dev/null || break; done',
        'step "train: ended with code $CT_RC"',
        f'if [ "$CT_RC" = 0 ] && {done}; then step "done"; exit 0; fi',
        "# SIGTERM (preemption, scancel) is SLURM's to act on: a preempted job with --requeue goes back",
        "# to the queue by itself, a cancelled one must not. The time-limit signal is ours to requeue.",
        'if [ "$CT_STOP_SIGNAL" = USR2 ]; then',
        '  if [ "$CT_RESTART" -lt "$CT_MAX_REQUEUES" ]; then',
        '    step "requeue: the job resumes from its last checkpoint"',
        '    scontrol requeue "$SLURM_JOB_ID"',
        "    exit 0",
        "  fi",
        '  step "not requeued: the time limit was reached after $CT_RESTART requeue(s) (launch.max_requeues)"',
        "  exit 3",
        "fi",
        'exit "$CT_RC"',
    ]


def rdzv_conf(plan: LaunchPlan) -> str:
    # read_timeout bounds the connection to the rendezvous store too (torch's default: 60 s):
    # an unreachable first node then fails within the join timeout instead of hanging.
    return f"--rdzv-conf=join_timeout={plan.rdzv_timeout},read_timeout={min(plan.rdzv_timeout, 60)}"


def sbatch_argv(plan: LaunchPlan, script: Path) -> list[str]:
    """Paths go on the command line as arguments, not into ``#SBATCH`` lines, so any path works.
    The job starts in the submitting directory (SLURM's default), where relative paths in the
    recipe and in ``launch.setup`` point, as they do for a local run. Output and errors go to the
    same log in the run directory: ``--error`` on the command line also overrides a site's or a
    user's ``SBATCH_ERROR``, which would send stderr elsewhere."""
    log = Path(plan.run_dir) / "logs" / batch_log_name()
    return ["sbatch", "--parsable", f"--output={log}", f"--error={log}", str(script)]
