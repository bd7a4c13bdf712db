"""DeepSpeed's compiled ops that a config makes it build on first use, and the line that says so.

With ``DS_BUILD_OPS=0`` (how clustertune installs DeepSpeed) an op such as the CPU Adam of an
optimizer offloaded to host memory is compiled the first time a run needs it: minutes of a
silent process (3 min 10 s measured for a ZeRO-3 offload run on 2 cores). torch keeps the result
under ``$TORCH_EXTENSIONS_DIR``, so later runs on the machine load it in a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The optimizer DeepSpeed picks when its state is offloaded to host memory, by the config's type.
_OFFLOADED = {"adam": "cpu_adam", "adamw": "cpu_adam", "adagrad": "cpu_adagrad", "lion": "cpu_lion"}
_ON_GPU = {"adam": "fused_adam", "adamw": "fused_adam", "lion": "fused_lion"}


def ops_of(cfg: dict[str, Any], cuda: bool) -> list[str]:
    """The compiled ops ``deepspeed.initialize`` loads for this config's optimizer."""
    opt = cfg.get("optimizer") or {}
    kind = str(opt.get("type", "")).lower()
    zero = cfg.get("zero_optimization") or {}
    offload = isinstance(zero, dict) and (zero.get("offload_optimizer") or {}).get("device") in ("cpu", "nvme")
    if offload:
        return [_OFFLOADED[kind]] if kind in _OFFLOADED else []
    if cuda and kind in _ON_GPU and not (opt.get("params") or {}).get("torch_adam"):
        return [_ON_GPU[kind]]
    return []


def is_built(op: str) -> bool:
    """Whether ``op`` loads without compiling: installed prebuilt, or compiled here before."""
    try:
        from deepspeed.git_version_info import installed_ops

        if installed_ops.get(op):
            return True
    except ImportError:
        pass
    from torch.utils.cpp_extension import _get_build_directory

    return (Path(_get_build_directory(op, verbose=False)) / f"{op}.so").is_file()


def skip_the_cpu_shm_all_reduce() -> None:
    """Keep DeepSpeed on a CPU machine from compiling its shared-memory all-reduce.

    On the CPU accelerator every start of DeepSpeed's comm backend builds ``deepspeed_shm_comm``
    first (29 s of a silent compiler on 2 cores, 49 CPU s, once per machine, and again for each new
    ``$TORCH_EXTENSIONS_DIR``). Only ``inference_all_reduce`` (tensor-parallel inference) calls it;
    ZeRO training reduces through the process group. Marked incompatible, as it is on platforms
    other than Linux, DeepSpeed leaves it unbuilt and reduces through the group. The table is the
    one ``deepspeed.ops`` probes once per process and keeps; it is read when the backend starts.
    """
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() != "cpu":
        return
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def build_line(cfg: dict[str, Any], cuda: bool) -> str | None:
    """``DeepSpeed: compiling its cpu_adam op ...`` when the run is about to compile one, else None."""
    todo = [op for op in ops_of(cfg, cuda) if not is_built(op)]
    if not todo:
        return None
    return (f"DeepSpeed: compiling its {', '.join(todo)} op (first use on this machine: a few minutes with no "
            "output; later runs load it in seconds)")
