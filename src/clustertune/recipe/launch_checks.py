"""Launch settings that contradict each other, found before anything is submitted.

The SLURM resource keys map one to one onto ``sbatch`` options; the combinations SLURM itself
refuses (``--cpus-per-task`` with ``--cpus-per-gpu``, two ways of asking for GPUs) are named
here with the key to change, instead of surfacing as an sbatch error after the run was created.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clustertune.recipe.schema import LaunchSection

# sbatch options that a launch key owns: written through ``sbatch_extra`` they would be a
# second, contradicting request.
OWNED_FLAGS: dict[str, str] = {
    "--gres": "gres", "--gpus-per-node": "gpus_per_node", "--gpus-per-task": "gpus_per_task",
    "--gpus": "gpus_per_node", "-G": "gpus_per_node", "--cpus-per-task": "cpus_per_task", "-c": "cpus_per_task",
    "--cpus-per-gpu": "cpus_per_gpu", "--nodes": "nodes", "-N": "nodes", "--ntasks-per-node": "procs_per_node",
    "--time": "time", "-t": "time", "--partition": "partition", "-p": "partition", "--account": "account",
    "-A": "account", "--mem": "mem", "--qos": "qos", "--constraint": "constraint", "-C": "constraint",
    "--signal": "signal", "--job-name": "job_name", "-J": "job_name", "--tmp": "tmp_disk",
}
# Where a job's output goes is clustertune's: every log stays in the run's logs/, where
# `clustertune logs` and `status` read it (a user's `-e` sent stderr to ./JOBID.err before).
LOG_FLAGS = frozenset({"-o", "--output", "-e", "--error"})


# What sbatch itself accepts (checked against sbatch's own parser): a time limit as minutes,
# MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, or no limit; memory as a whole number with an
# optional unit (K, M, G, T; a trailing B is allowed, MB the default).
SLURM_TIME = re.compile(r"^(?:\d+(?::\d+){0,2}|\d+-\d+(?::\d+){0,2}|-1|(?i:unlimited|infinite))$")
SLURM_MEM = re.compile(r"^\d+(?:[KMGTkmgt][Bb]?)?$")

# Names that look like secrets must travel by env_passthrough, never in launch.env (written
# into job scripts and the run's plan): a name is secret-looking when one of its
# underscore-separated words is one of these.
SECRET_WORDS = frozenset({
    "PASS", "PASSWD", "PASSWORD", "PASSPHRASE", "TOKEN", "SECRET", "SECRETS", "KEY", "KEYS",
    "APIKEY", "PAT", "AUTH", "CREDENTIAL", "CREDENTIALS", "CREDS", "PRIVATE", "COOKIE", "SIGNATURE",
})
# What clustertune and ssh set themselves, whatever their words say.
NOT_SECRET = frozenset({"TOKENIZERS_PARALLELISM", "SSH_AUTH_SOCK"})


def slurm_format_problems(ln: LaunchSection) -> list[tuple[str, str]]:
    """``launch.time``, ``launch.mem`` and ``launch.tmp_disk`` that sbatch would refuse, with how to write them."""
    out = []
    if ln.time is not None and not SLURM_TIME.match(ln.time.strip()):
        out.append(("launch.time", f"{ln.time!r} is not a SLURM time limit; write minutes (90), HH:MM:SS (04:00:00), "
                    "D-HH (2-00) or D-HH:MM:SS (2-00:00:00), or UNLIMITED"))
    if ln.mem is not None and not SLURM_MEM.match(ln.mem.strip()):
        out.append(("launch.mem", f"{ln.mem!r} is not a SLURM memory size; write a whole number with an optional "
                    "unit K, M, G or T (64G, 500M, 1T: no decimals, no GiB), or 0 for all of a node's memory"))
    if ln.tmp_disk is not None and not SLURM_MEM.match(ln.tmp_disk.strip()):
        out.append(("launch.tmp_disk", f"{ln.tmp_disk!r} is not a SLURM disk size; write a whole number with an "
                    "optional unit K, M, G or T (1500G, 200M, 2T: no decimals, no GiB)"))
    return out


def gres_gpus(gres: str) -> int | None:
    """GPUs per node in a ``--gres`` request (``gpu:8``, ``gpu:a100:4``, ``gpu`` = 1); None
    when it asks for no GPU."""
    for item in gres.split(","):
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        return int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return None


def gpus_requested(ln: LaunchSection) -> int | None:
    """GPUs per node the job asks SLURM for (one task per node), None when it asks for none."""
    if ln.gpus_per_node:
        return ln.gpus_per_node
    if ln.gpus_per_task:
        return ln.gpus_per_task
    return gres_gpus(ln.gres) if ln.gres else None


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret (``DB_PASS``, ``HF_AUTH``)."""
    upper = name.upper()
    return upper not in NOT_SECRET and any(word in SECRET_WORDS for word in upper.split("_"))


def _flag_name(option: str) -> str:
    """The option an ``sbatch_extra`` entry sets, however it is spelled: ``--output=x``,
    ``--output x``, ``-o x`` and ``-ox`` all set ``-o``/``--output``."""
    name = re.split(r"[= \t]", option.strip(), maxsplit=1)[0]
    if len(name) > 2 and name[0] == "-" and name[1] != "-":
        return name[:2]  # a short option with its value attached (-ox, -N2)
    return name


def launch_problems(ln: LaunchSection) -> list[tuple[str, str]]:
    """(key, message) for every contradiction in the launch section."""
    out: list[tuple[str, str]] = []
    ways = [k for k in ("gpus_per_node", "gpus_per_task", "gres") if getattr(ln, k)]
    if len(ways) > 1:
        out.append((f"launch.{ways[1]}", f"GPUs are asked for twice ({' and '.join('launch.' + w for w in ways)}); "
                    "keep the one your site uses"))
    if ln.gpu_type and ln.gres:
        out.append(("launch.gpu_type", f"with launch.gres, write the type inside it (gres=gpu:{ln.gpu_type}:N)"))
    elif ln.gpu_type and not (ln.gpus_per_node or ln.gpus_per_task):
        out.append(("launch.gpu_type", "types the GPUs of launch.gpus_per_node or launch.gpus_per_task; set one of them"))
    if ln.cpus_per_task and ln.cpus_per_gpu:
        out.append(("launch.cpus_per_gpu", "SLURM refuses --cpus-per-gpu together with --cpus-per-task; "
                    "keep one of launch.cpus_per_gpu and launch.cpus_per_task"))
    if ln.cpus_per_gpu and gpus_requested(ln) is None:
        out.append(("launch.cpus_per_gpu", "needs GPUs (launch.gpus_per_node, gpus_per_task or gres); "
                    "on CPU-only partitions use launch.cpus_per_task"))
    for option in ln.sbatch_extra:
        flag = _flag_name(option)
        key = OWNED_FLAGS.get(flag)
        if key:
            out.append(("launch.sbatch_extra", f"{option!r} is set through launch.{key}; move it there"))
        elif flag in LOG_FLAGS:
            out.append(("launch.sbatch_extra", f"{option!r}: the job's logs are set by clustertune and stay in "
                        "the run directory (logs/), where `clustertune logs RUN_ID` reads them; remove it "
                        "(name the job with launch.job_name)"))
    out.extend(slurm_format_problems(ln))
    secret = [name for name in ln.env if secret_looking(name)]
    if secret:
        out.append(("launch.env", f"{', '.join(secret)} look(s) like secrets, which would be written into the job "
                    "script; list the name(s) in launch.env_passthrough instead and set them in your environment"))
    if ln.prepare is not None and ln.backend == "ssh":
        out.append(("launch.prepare", "runs once, on the first node, with launch.backend slurm or local; on SSH "
                    "hosts prepare the data with launch.setup lines (they run on each host)"))
    if ln.prepare_data == "job" and ln.backend != "slurm":
        out.append(("launch.prepare_data", f"'job' prepares the data as a SLURM job's first step; with "
                    f"launch.backend={ln.backend} use 'submitter' or 'auto'"))
    return out
