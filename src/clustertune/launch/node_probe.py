"""What a compute node offers a run, asked on the node itself: Python, torch (and the CUDA runtime
it ships with), transformers, clustertune, glibc, each GPU's name, memory, driver and compute
capability as ``nvidia-smi`` reports them, and whether the node sees the paths and hub models the
run reads.

This file is run on the node as ``python -c <its source>`` by the interpreter the job would use,
after the job's own ``launch.setup`` lines, so it may import nothing but the standard library: the
node may lack clustertune, torch, or the very interpreter (which is itself an answer). Versions come
from the installed distributions' metadata, never from importing torch (seconds on a cold node).
Its one line of output starts with :data:`MARK`; :func:`parse` reads it back here.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib import metadata

MARK = "CT-NODE-PROBE "
# The CUDA runtime a pip-installed torch carries (its own wheel, not the system toolkit).
CUDA_RUNTIME_DISTS = ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _gpus() -> list[dict[str, object]] | None:
    """One entry per GPU, or None where there is no ``nvidia-smi`` (no NVIDIA driver here)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total,driver_version,compute_cap",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [{"error": f"nvidia-smi failed: {exc}"}]
    if out.returncode != 0:
        return [{"error": f"nvidia-smi exited {out.returncode}: {(out.stderr or out.stdout).strip()[:300]}"}]
    gpus: list[dict[str, object]] = []
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 4:
            continue
        name, mib, driver, cap = cells
        gpus.append({"name": name, "memory_mib": int(mib) if mib.isdigit() else None, "driver": driver,
                     "compute_capability": cap})
    return gpus


def _hub_cache() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return os.path.join(home, "hub")


def _online() -> bool:
    """Whether the hub answers from here (an offline node's connect fails or times out)."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
        return True
    except OSError:
        return False


def _seen() -> dict[str, object]:
    """The paths (``CT_PROBE_PATHS``) and hub models (``CT_PROBE_HUB``, JSON lists) a run reads:
    whether each path exists here, and each model is in this node's hub cache."""
    paths = json.loads(os.environ.get("CT_PROBE_PATHS") or "[]")
    hub = json.loads(os.environ.get("CT_PROBE_HUB") or "[]")
    if not paths and not hub:
        return {}
    cache = _hub_cache()
    cached = {m: os.path.isdir(os.path.join(cache, "models--" + m.replace("/", "--"), "snapshots")) for m in hub}
    return {"paths": {p: os.path.exists(p) for p in paths}, "hub": cached, "hub_cache": cache,
            "online": _online() if hub else None}


def facts() -> dict[str, object]:
    libc, libc_version = platform.libc_ver()
    return {**_seen(),
        "node": os.environ.get("SLURMD_NODENAME") or platform.node(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": _version("torch"),
        "cuda_runtime": next((v for d in CUDA_RUNTIME_DISTS if (v := _version(d))), None),
        "transformers": _version("transformers"),
        "flash_attn": _version("flash-attn") or _version("flash_attn"),
        "bitsandbytes": _version("bitsandbytes"),
        "clustertune": _version("clustertune"),
        "glibc": libc_version if libc == "glibc" else None,
        "gpus": _gpus(),
    }


def parse(output: str) -> dict[str, object] | None:
    """The facts from the probe's output (other lines, e.g. a site's login banner, are skipped)."""
    for line in output.splitlines():
        if line.startswith(MARK):
            found = json.loads(line[len(MARK):])
            return found if isinstance(found, dict) else None
    return None


def source() -> str:
    """This file's text, for ``python -c`` on the node."""
    with open(__file__, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    print(MARK + json.dumps(facts()), flush=True)
