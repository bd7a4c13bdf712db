"""The recipe's ``launch`` section: where and how the job runs (backend, nodes, processes,
GPUs and CPUs, SLURM options, environments on the hosts). Re-exported by
:mod:`clustertune.recipe.schema`, which assembles the whole recipe."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from clustertune.recipe.section import Section


class LaunchSection(Section):
    backend: Literal["local", "slurm", "ssh"] = "local"
    """Where the job runs. ``local``: this machine (one process, or ``procs_per_node`` processes
    through torchrun); ``slurm``: an sbatch job of ``nodes`` nodes; ``ssh``: the first ``nodes``
    hosts of the SSH cluster ``launch.cluster`` (``clustertune cluster add``)."""

    cluster: str | None = None
    """``backend: ssh``: the name of a cluster in the user's cluster config (``clustertune cluster ls``)."""

    preflight: bool = True
    """``backend: slurm`` or ``ssh``: before submitting (and in the dry run), ask the cluster whether
    the run fits it: on SLURM the partition, its time and node limits, the GPU types, ``sbatch
    --test-only`` and a short probe of a compute node's environment (kept for a day); on SSH each
    host's GPUs, memory and disk; and the memory per GPU. ``false`` skips these checks
    (``clustertune validate RECIPE --on CLUSTER`` runs them alone)."""

    keep_on_cluster: bool = False
    """``backend: ssh``: leave metrics, checkpoints and the final model on the hosts instead of
    copying them back into the local run directory (logs and state are still read from there)."""

    requirements: list[str] = Field(default_factory=list)
    """``backend: ssh``: pip requirements of the env built on each host (torch, transformers,
    accelerate... with the versions the hosts need); clustertune's own code is synced with the run.
    Empty (and no ``site_packages_from``): clustertune's own dependencies."""

    site_packages_from: str | None = None
    """``backend: ssh``: a Python on the hosts whose installed packages the env reuses (an
    existing torch install) instead of installing them again."""

    nodes: int = Field(default=1, ge=1)
    """Nodes (hosts) the job spans; more than one needs ``backend: slurm`` or ``backend: ssh``."""

    procs_per_node: int | None = Field(default=None, ge=1)
    """Training processes per node. Unset: resolved on the node from the GPUs it sees, else 1
    (the submitting host may have no GPU)."""

    gpus_per_node: int = Field(default=0, ge=0)
    """GPUs per node (``--gpus-per-node``; typed with ``gpu_type``). One of ``gpus_per_node``,
    ``gpus_per_task`` and ``gres`` says how GPUs are asked for; 0 on CPU-only partitions."""

    gpus_per_task: int | None = Field(default=None, ge=1)
    """GPUs per task (``--gpus-per-task``; typed with ``gpu_type``), for sites that count GPUs
    per task. The job has one task per node, so this is the GPUs each node gets."""

    gres: str | None = Field(default=None, pattern=r"^[A-Za-z_]+(?::[\w.-]+)*(?:,[A-Za-z_]+(?::[\w.-]+)*)*$")
    """A generic-resource request (``--gres``) as sites write it: ``gpu:8``, ``gpu:a100:4``,
    ``gpu:rtx8000:1,nvme:100``. Its GPU count sets the ranks per node."""

    gpu_type: str | None = Field(default=None, pattern=r"^[\w.-]+$")
    """GPU type (``a100``, ``rtx8000``) for ``gpus_per_node`` or ``gpus_per_task``: rendered as
    ``--gpus-per-node=a100:4``. With ``gres``, write the type inside it."""

    cpus_per_gpu: int | None = Field(default=None, ge=1)
    """CPU cores per allocated GPU (``--cpus-per-gpu``). SLURM refuses it together with
    ``cpus_per_task``: set one. Neither: the site's default."""

    cpus_per_task: int | None = Field(default=None, ge=1)
    """CPU cores for the one task per node (``--cpus-per-task``; the training step gets them
    too), e.g. 32 for 8 GPUs with their data loaders. SLURM refuses it together with ``cpus_per_gpu``."""

    mem: str | None = None
    """Memory per node (``--mem``), e.g. ``64G``."""

    tmp_disk: str | None = None
    """Node-local disk per node (``--tmp``), in ``mem``'s syntax, e.g. ``1500G``: only nodes with
    that much free temporary disk (``$SLURM_TMPDIR``, ``/tmp``) are given to the job."""

    time: str | None = None
    """Time limit (``--time``), e.g. ``04:00:00`` or ``2-00:00:00``."""

    job_name: str | None = Field(default=None, pattern=r"^[\w.+@:-]{1,128}$")
    """The SLURM job's name (``--job-name``) as ``squeue`` and ``clustertune status`` show it;
    unset: ``ct-<run id>``. Letters, digits and ``_ . + @ : -``."""

    @field_validator("time", "mem", "tmp_disk", mode="before")
    @classmethod
    def _whole_numbers_as_text(cls, value: Any) -> Any:
        # `time: 90` (minutes) and `mem: 64000` (MB) are numbers in YAML; sbatch takes them as written.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    partition: str | None = None
    """SLURM partition (``--partition``)."""

    account: str | None = None
    """SLURM account to charge (``--account``)."""

    qos: str | None = None
    """SLURM quality of service (``--qos``)."""

    constraint: str | None = None
    """Node features required (``--constraint``), e.g. ``a100``."""

    dependency: str | None = None
    """Start after other jobs (``--dependency``), e.g. ``afterok:1234``."""

    sbatch_extra: list[str] = Field(default_factory=list)
    """Extra ``#SBATCH`` options, each as ``--flag=value`` (written as given, after the others).
    Options a launch key owns are refused with that key (``--job-name``: ``job_name``,
    ``--tmp``: ``tmp_disk``...), and so are ``-o``/``-e``/``--output``/``--error``: every log of a
    run stays in its ``logs/``, where ``clustertune logs`` reads it."""

    setup: list[str] = Field(default_factory=list)
    """Shell lines run before the data step and training (``module load ...``, ``source
    venv/bin/activate``); on SLURM they run with ``set -e``: a failing line stops the job."""

    files: list[str] = Field(default_factory=list)
    """Local files or folders your setup lines or code read on the nodes (a script to source, a
    reward module, a vocabulary). Each lands in the run's ``files/`` folder on every node, by its
    last name (``$CLUSTERTUNE_FILES/<name>``; that folder is also on the ranks' ``sys.path``).
    Relative paths start beside the recipe, then in the working directory. On SSH hosts they
    arrive as content-addressed snapshots (sent once per host and content), on SLURM as a
    snapshot in the run directory; a later edit here does not reach a resumed run."""

    sync_workdir: bool = True
    """``clustertune launch`` on SSH hosts: mirror this directory to each host (``.gitignore``
    respected) and run the command there. ``false``: nothing is mirrored and the command starts in
    the run's directory on the host (a command installed there, ``launch.files`` for what it reads)."""

    node_visible: list[str] = Field(default_factory=list)
    """SLURM: path prefixes the compute nodes see as this machine does (``/shared``,
    ``/project/me``). A local model, JSON or folder the recipe names under one of them is read
    there in place; any other is snapshotted into the run directory first (the dry run lists
    which). The run directory and the data cache are always read in place."""

    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set for the training processes (not secrets: they are written
    into the job script). ``$NAME`` and ``${NAME}`` in a value expand where the job runs, on each
    node with that node's values (``HF_HOME: $SCRATCH/hf``, ``STAGE: $SLURM_TMPDIR/data``), as
    ``data.stage_to`` does; ``$$`` is a literal ``$``; nothing else is interpreted (no ``$(...)``,
    no globs)."""

    prepare_data: Literal["auto", "submitter", "job"] = "auto"
    """Where the data is prepared (tokenized and packed into the cache, once). ``submitter``:
    on this machine before anything starts (it needs the inputs and the cache directory, shared
    with the nodes); ``job``: as the SLURM job's first step, on a compute node (login nodes
    that forbid heavy work; the inputs must be reachable there: ``clustertune fetch`` for
    nodes without internet). ``auto``: ``job`` on SLURM, ``submitter`` elsewhere."""

    env_passthrough: list[str] = Field(default_factory=list)
    """Names of variables (``HF_TOKEN``) whose values travel from the submitting environment
    to the job through the process environment, never through files or argv."""

    nccl_socket_ifname: str | None = None
    """``NCCL_SOCKET_IFNAME`` for the job (the interface NCCL uses between nodes), e.g. ``ib0``."""

    node_address_suffix: str | None = None
    """Appended to the first node's name to get the rendezvous host, for clusters whose fast
    network has its own hostnames (``-ib``); unset: the node's address from ``scontrol``."""

    rdzv_timeout: int = Field(default=900, ge=1)
    """Seconds the nodes wait for each other at the rendezvous before failing."""

    max_restarts: int = Field(default=0, ge=0)
    """Times torchrun's elastic agent restarts failed workers (they resume from the last checkpoint)."""

    watchdog_minutes: float | None = Field(default=None, gt=0)
    """Hang watchdog: no optimizer step for this many minutes dumps every rank's stack to the
    log and fails the run. It counts from the end of the first step, and evaluations and
    checkpoint writes do not count, so a slow model load, the first step's compilation or a
    long evaluation never trips it (a hang there ends at ``train.collective_timeout_minutes``)."""

    signal: str = Field(default="B:USR2@90", pattern=r"^(?:[BR]:)?(?:SIG)?[A-Z0-9]+(?:@[0-9]+)?$")
    """SLURM ``--signal`` asking for a stop request before the time limit (``B:`` sends it to the
    batch shell, which passes it on; USR2 since NCCL may use USR1)."""

    max_requeues: int = Field(default=3, ge=0)
    """Requeues after the time limit's stop request; a preemption (SIGTERM) always requeues."""

    runner: Literal["torchrun", "none", "srun"] = "torchrun"
    """``clustertune launch`` (your own script): ``torchrun`` runs the command as every rank
    (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``... set as torchrun sets them); ``srun`` (SLURM
    only) starts every rank as a SLURM task, ``procs_per_node`` per node (else one per GPU asked
    for), with no torchrun: the same variables come from SLURM's (``RANK`` from
    ``SLURM_PROCID``, ``LOCAL_RANK`` from ``SLURM_LOCALID``...), as HPC guides' ``srun``/``mpirun``
    scripts expect; ``none`` runs it
    once per node, for commands that start their own processes (``accelerate launch``,
    ``deepspeed``), with ``{node_rank}``, ``{nnodes}``, ``{master_addr}``, ``{master_port}`` and
    ``{run_dir}`` in its arguments filled in per node. Recipes always run under torchrun."""

    tee: Literal["rank0", "all"] = "rank0"
    """``clustertune launch``: whose output a foreground launch shows live on the terminal.
    ``rank0``: the first rank's stdout and stderr as they are (every rank's is in its own
    ``logs/rank-R.log``); ``all``: every rank's, each line prefixed ``[rank R]``, as
    ``torchrun --tee`` does. Under ``launch.runner=none`` the first node's output."""

    stage: list[str] = Field(default_factory=list)
    """``clustertune launch``: paths (a dataset directory, a Hugging Face cache folder, a file)
    copied once per node to node-local disk before the command starts: under ``$SLURM_TMPDIR``
    where set, else ``$TMPDIR`` or the system's temporary directory. Each copy is checked (sizes
    and SHA-256) and named to the command in ``CLUSTERTUNE_STAGED_<NAME>``: the path's last part
    in upper case, other characters than letters and digits as ``_`` (``/data/my-set``:
    ``CLUSTERTUNE_STAGED_MY_SET``). Relative paths start where the command does."""

    prepare: str | list[str] | None = None
    """``clustertune launch``: a command run once, on the first node, before your command starts
    and before ``launch.stage`` copies its paths to every node: the ``srun --ntasks=1 python
    prepare_data.py`` of an sbatch script, whose output the stage then copies to node-local disk.
    A string is a shell line (bash runs it: ``python prepare_data.py --out $SCRATCH/set``), a
    list an argument list run as it is (``[python, prepare_data.py]``). It starts where the
    command does, with ``launch.env`` and the run's variables set; its output goes to
    ``logs/prepare.log``, and a failure ends the run before the command starts. Once per run: a
    requeued or resumed attempt finds it done and skips it. SLURM and local backends."""

    stop_grace_seconds: int = Field(default=30, ge=0)
    """``clustertune launch``: seconds a script's ranks have, after a stop request reaches them as
    SIGTERM (time limit, preemption, cancel), to save and exit before they get SIGKILL. Under the
    torchrun runner at most 30 take effect on a preemption's SIGTERM (torchrun's own limit)."""

    @field_validator("prepare")
    @classmethod
    def _a_command(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None and not (value.strip() if isinstance(value, str) else value and value[0].strip()):
            raise ValueError("give the command to run, e.g. 'python prepare_data.py' (or leave launch.prepare unset)")
        return value

    @field_validator("node_visible")
    @classmethod
    def _absolute_prefixes(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not v.startswith("/")]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))}: give absolute path prefixes (as the nodes see them), "
                             "e.g. /shared")
        return [v.rstrip("/") or "/" for v in value]
