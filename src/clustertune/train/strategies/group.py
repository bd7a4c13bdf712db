"""The process group, its device and the precision probe: set up before any Accelerator exists.

The group is made here rather than by Accelerate for three reasons:

- sharded strategies (FSDP, ZeRO) need a group even in a single process: ``fully_shard`` reads
  ``RANK`` from the environment and fails without it, so one process gets a group of one;
- FSDP with CPU offload clips gradients and gathers the final weights on host tensors, which
  NCCL cannot reduce: the group needs a gloo backend for CPU tensors beside NCCL for the GPU
  (Accelerate adds it only when its own environment variables ask for offload);
- the collective timeout is a recipe setting (a checkpoint of hundreds of GB sealed on a
  network filesystem outlasts torch's 10-minute default).

The device is set from ``LOCAL_RANK`` first, so that NCCL, the bf16 probe and every CUDA call
after it use this rank's GPU instead of all making a context on GPU 0.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch

# The variables a launcher (torchrun, srun + torchrun) sets for every rank.
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def local_rank(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    return int(env.get("LOCAL_RANK", "0") or 0)


def local_device(cuda: bool | None = None, env: Mapping[str, str] | None = None) -> torch.device:
    """This rank's device: ``cuda:LOCAL_RANK`` on a GPU host, else the CPU."""
    cuda = torch.cuda.is_available() if cuda is None else cuda
    return torch.device("cuda", local_rank(env)) if cuda else torch.device("cpu")


def group_backend(cuda: bool, offload: bool) -> str:
    """The backend string for ``init_process_group``: gloo on CPU; NCCL on GPUs, plus gloo for
    CPU tensors when state is offloaded to host memory."""
    if not cuda:
        return "gloo"
    return "cuda:nccl,cpu:gloo" if offload else "nccl"


def auto_precision(cuda: bool, native_bf16: bool, cpu_bf16: bool = False) -> str:
    """What ``train.precision: auto`` means: bf16 where the GPU computes it natively, fp16 on
    older GPUs (V100, T4: bf16 there is emulated and slow); on CPU, bf16 where the processor has
    bf16 matrix instructions (``cpu_bf16``), else fp32."""
    if not cuda:
        return "bf16" if cpu_bf16 else "no"
    return "bf16" if native_bf16 else "fp16"


def native_bf16() -> bool:
    """bf16 in hardware on this rank's GPU (emulation does not count); call after set_device."""
    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False))


# x86 flags (Linux /proc/cpuinfo) of bf16 dot-product and matrix instructions: AVX512-BF16
# (Cooper Lake, Sapphire Rapids, AMD Zen 4 and later) and AMX-BF16 (Sapphire Rapids and later).
# torch's own capability string says only "AVX512" on such machines, which plain AVX-512 CPUs
# (Skylake-X, emulating bf16 and slower than fp32 there) report too.
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_bf16(cpuinfo: str | None = None) -> bool:
    """This CPU has bf16 matrix instructions (``cpuinfo``: the text of /proc/cpuinfo; read here
    when not given; False where there is none, as on macOS)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return bool(CPU_BF16_FLAGS & set(value.split()))
    return False


def fp32_matmul_precision(tf32: bool | None, cuda: bool) -> str:
    """torch's float32 matmul precision: ``high`` (TF32 tensor cores) on a GPU unless the recipe
    turns it off, ``highest`` otherwise (CPU: TF32 does not exist there)."""
    use = cuda if tf32 is None else (tf32 and cuda)
    return "high" if use else "highest"


@dataclass
class OwnGroup:
    """A group this module made for one process (no launcher), undone by ``close``."""

    env_set: list[str] = field(default_factory=list)

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        for k in self.env_set:
            os.environ.pop(k, None)
        self.env_set.clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_process_group(sharded: bool, offload: bool, timeout_minutes: float,
                        env: dict[str, str] | None = None) -> OwnGroup | None:
    """Set this rank's device and make the default process group when it is needed and not up.

    Under a launcher (``RANK`` set) every strategy gets the group here. Without one, a sharded
    strategy gets a group of one process (returned, so that the caller can undo it); an
    unsharded one runs without a group, as before. Returns None when nothing needs undoing.
    """
    import torch.distributed as dist

    env = os.environ if env is None else env
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_device(cuda, env))
    launched = "RANK" in env
    if dist.is_initialized() or not (launched or sharded):
        return None
    kwargs: dict[str, Any] = {"backend": group_backend(cuda, offload), "timeout": timedelta(minutes=timeout_minutes)}
    own = None
    if not launched:
        own = OwnGroup()
        kwargs.update(init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
        if cuda:
            # Accelerate takes its FSDP path only when a launcher's LOCAL_RANK is there; on CPU
            # it must not see one (it would take over the thread count), and shards itself.
            wanted = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
            own.env_set = [k for k in wanted if k not in env]
            env.update({k: wanted[k] for k in own.env_set})
    if cuda:
        kwargs["device_id"] = local_device(cuda, env)  # NCCL binds its communicator to this GPU
    dist.init_process_group(**kwargs)
    return own

