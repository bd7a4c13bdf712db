"""``clustertune doctor``: what this machine offers a run, and how to fix what is missing.

Each check returns a :class:`Check` (name, what was found, ok or not, the fix). Nothing here
changes the machine; the hub check makes one short HTTPS request unless offline mode is set.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from clustertune.extras import install_hint, installed_version
from clustertune.runs.store import runs_root


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    ok: bool = True
    fix: str = ""


PACKAGES = ("torch", "transformers", "accelerate", "datasets", "tokenizers", "safetensors", "peft", "deepspeed",
            "trl", "bitsandbytes", "lm-eval", "fastapi")
# The optional packages: the extra that installs each (pyproject's optional-dependencies) and what needs it.
OPTIONAL = {"deepspeed": ("deepspeed", "train.strategy: deepspeed"), "bitsandbytes": ("qlora", "model.adapter.type: qlora"),
            "lm-eval": ("lm-eval", "clustertune eval --tasks"), "fastapi": ("serve", "clustertune serve")}


def _fix(pkg: str) -> str:
    if pkg in OPTIONAL:
        extra, used_by = OPTIONAL[pkg]
        return f"{install_hint(extra)} ({used_by})"
    return f"pip install {pkg}"



def versions() -> list[Check]:
    out = [Check("python", platform.python_version())]
    for pkg in PACKAGES:
        v = installed_version(pkg)
        if v is None:
            required = pkg in ("torch", "transformers", "accelerate")
            out.append(Check(pkg, "not installed" if required else "not installed (optional)", not required,
                             _fix(pkg)))
        else:
            out.append(Check(pkg, v))
    return out


def devices() -> list[Check]:
    import torch

    # Deferred: importing them pulls in numpy, torch, which this module's importers do not need.
    from clustertune.train.precision import auto_mixed_precision, recorded_name
    from clustertune.train.throughput import device_peak_flops

    out = [Check("torch build", f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})")]
    # What a run records as its precision: the one function runs decide `auto` with.
    precision = Check("precision", f"{recorded_name(auto_mixed_precision())} (what train.precision: auto uses here)")
    if not torch.cuda.is_available():
        out.append(Check("GPUs", "none visible: training runs on the CPU"))
        return out + [precision]
    out.append(Check("NCCL", ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "?"))
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        with torch.cuda.device(i):
            peak = device_peak_flops()
        out.append(Check(
            f"GPU {i}", f"{props.name}, {props.total_memory / 1e9:.0f} GB, "
            + (f"peak {peak / 1e12:.0f} TFLOP/s bf16" if peak else "peak FLOP/s unknown"),
            ok=peak is not None, fix="set train.peak_flops in the recipe so MFU can be shown",
        ))
    return out + [precision]


def deepspeed_ops() -> list[Check]:
    if importlib.util.find_spec("deepspeed") is None:
        return [Check("deepspeed ops", "deepspeed not installed", True, "")]
    ninja = shutil.which("ninja") is not None or importlib.util.find_spec("ninja") is not None
    compiler = shutil.which("c++") or shutil.which("g++")
    ok = ninja and compiler is not None
    return [Check("deepspeed ops", "JIT build possible (ninja and a C++ compiler found)" if ok else
                  f"cannot JIT-build (ninja {'found' if ninja else 'missing'}, C++ compiler "
                  f"{'found' if compiler else 'missing'})", ok,
                  f"{install_hint('deepspeed')} (it brings ninja); apt-get install g++ "
                  "(CPU Adam for optimizer offload builds on first use)")]


def tools() -> list[Check]:
    out = []
    for tool, fix in (
        ("sbatch", "SLURM client tools: apt-get install slurm-client (needed for launch.backend=slurm)"),
        ("squeue", "apt-get install slurm-client"),
        ("scontrol", "apt-get install slurm-client"),
        ("ssh", "apt-get install openssh-client (needed for SSH clusters)"),
        ("rsync", "apt-get install rsync (needed to sync code and runs to SSH hosts)"),
    ):
        path = shutil.which(tool)
        out.append(Check(tool, path or "not found", path is not None, fix))
    return out


def hub() -> list[Check]:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"
    if offline:
        return [Check("hub", "offline mode (HF_HUB_OFFLINE=1): only local paths and the local cache are used")]
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0]
    name, _, port = host.partition(":")
    try:
        with socket.create_connection((name, int(port or (443 if endpoint.startswith("https") else 80))), timeout=3):
            pass
        return [Check("hub", f"{endpoint} reachable")]
    except OSError as exc:
        return [Check("hub", f"{endpoint} not reachable ({exc.__class__.__name__})", False,
                      "set HF_HUB_OFFLINE=1 and point recipes at local copies (save_pretrained / save_to_disk "
                      "on a machine with internet)")]


def caches() -> list[Check]:
    hf_home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    places = [("HF cache", hf_home), ("runs", runs_root())]
    out = []
    for label, path in places:
        probe = path
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        ok = free >= 5 * 1024**3
        out.append(Check(label, f"{path} ({free / 1024**3:.1f} GiB free)", ok,
                         f"free space under {probe} or point it elsewhere (HF_HOME, CLUSTERTUNE_RUNS)"))
    return out


def checks() -> list[tuple[str, list[Check]]]:
    return [
        ("versions", versions()),
        ("devices", devices()),
        ("deepspeed", deepspeed_ops()),
        ("cluster tools", tools()),
        ("hugging face hub", hub()),
        ("storage", caches()),
    ]
