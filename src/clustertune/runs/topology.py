"""The node-side view of where this process sits: ranks, world size, master, scheduler job.

Read once from the environment that torchrun (and SLURM around it) sets, then passed around
explicitly. Topology travels only through the environment; hyperparameters never do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    value = env.get(key, "")
    try:
        return int(value) if value.strip() else default
    except ValueError:
        raise ValueError(f"environment variable {key}={value!r} is not an integer") from None


@dataclass(frozen=True)
class Topology:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0
    job_id: str | None = None  # the scheduler's job id (SLURM), None outside a scheduler
    restart_count: int = 0  # SLURM requeues of this job
    node_name: str = ""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_node_main(self) -> bool:
        """The rank that does once-per-node work (staging) while the others wait."""
        return self.local_rank == 0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Topology:
        """From torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, ...) and SLURM's."""
        world = _int(env, "WORLD_SIZE", 1)
        rank = _int(env, "RANK", 0)
        if not 0 <= rank < world:
            raise ValueError(f"RANK={rank} is outside WORLD_SIZE={world}")
        return cls(
            rank=rank,
            local_rank=_int(env, "LOCAL_RANK", 0),
            world_size=world,
            local_world_size=_int(env, "LOCAL_WORLD_SIZE", 1),
            # torchrun's node rank; SLURM's node id when a single process runs under srun.
            node_rank=_int(env, "GROUP_RANK", _int(env, "SLURM_NODEID", 0)),
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=_int(env, "MASTER_PORT", 0),
            job_id=slurm_job_id(env),
            restart_count=_int(env, "SLURM_RESTART_COUNT", 0),
            node_name=env.get("SLURMD_NODENAME") or env.get("HOSTNAME", ""),
        )


def slurm_job_id(env: Mapping[str, str]) -> str | None:
    """The job's id as its run records it: an array task's is ``<array job>_<task>`` (what the
    sweep submitted and squeue shows), every other job's its SLURM_JOB_ID."""
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return env.get("SLURM_JOB_ID") or None
