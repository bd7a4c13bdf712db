"""GPU memory by the type names sites give their GPUs: SLURM GRES types (``gpu:a100:4``) and
``nvidia-smi`` names (``NVIDIA A100-SXM4-80GB``). Vendors' figures, in GB (10^9 bytes), as they
state them. A site's own names go in ``clusters.yaml`` under ``gpu_memory_gb`` and win.
"""

from __future__ import annotations

import re

from clustertune.remote.config import gpu_memory_overrides

# GRES type names as sites commonly spell them (lower case, separators dropped when looked up).
GPU_MEMORY_GB: dict[str, float] = {
    "h200": 141, "h100": 80, "h100nvl": 94, "h800": 80, "gh200": 96,
    "a100": 40, "a10080g": 80, "a10080gb": 80, "a100sxm480gb": 80, "a100pcie80gb": 80, "a10040g": 40,
    "a800": 80, "a40": 48, "a30": 24, "a10": 24, "a10g": 24, "a16": 16, "a2": 16,
    "l40s": 48, "l40": 48, "l4": 24, "t4": 16,
    "v100": 16, "v10032g": 32, "v100sxm232gb": 32, "p100": 16,
    "rtx6000ada": 48, "rtxa6000": 48, "a6000": 48, "rtx8000": 48, "rtx6000": 24, "a5000": 24, "rtxa5000": 24,
    "rtx4090": 24, "rtx3090": 24, "4090": 24, "3090": 24, "titanrtx": 24,
    "mi300x": 192, "mi250x": 128, "mi250": 128, "mi210": 64, "mi100": 32,
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def gpu_memory_gb(name: str) -> float | None:
    """The memory of a GPU named ``name`` (a GRES type, or an ``nvidia-smi`` name with the vendor
    dropped), or None when it is not known here nor in ``clusters.yaml``."""
    mine = {_key(k): v for k, v in gpu_memory_overrides().items()}
    key = _key(re.sub(r"^(nvidia|amd|tesla|geforce)[\s_-]+", "", name.strip(), flags=re.I))
    key = re.sub(r"^(nvidia|tesla|geforce)", "", key)
    return mine.get(key, GPU_MEMORY_GB.get(key))
