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


def build_line(cfg: dict[str, Any], cuda: bool) -> str | None:
    """``DeepSpeed: compiling its cpu_adam op ...`` when the run is about to compile one, else None."""
    todo = [op for op in ops_of(cfg, cuda) if not is_built(op)]
    if not todo:
        return None
    return (f"DeepSpeed: compiling its {', '.join(todo)} op (first use on this machine: a few minutes with no "
            "output; later runs load it in seconds)")
