"""GPUs on a host, as nvidia-smi reports them: parsed from its CSV text and picked for a call.

Part of the host helper (shipped beside ``_clustertune_runner.py`` as
``_clustertune_runner_gpus.py``); standard library only. Parsing and picking are pure functions
of nvidia-smi's text, so they are tested without a GPU.
"""

from __future__ import annotations

import shutil
import subprocess

GPU_QUERY = "index,name,memory.total,memory.used,utilization.gpu"
# A device counts as free when nothing much is loaded on it and it is not computing: a few
# hundred MiB is what the driver and a display take; a job that holds memory but idles still
# counts as busy (its memory is not ours to take).
FREE_MEMORY_MIB = 1024
FREE_UTILIZATION = 10


def _number(text: str):
    """``81559 MiB`` / ``81559`` / ``5 %`` -> a number; ``[N/A]``, ``[Not Supported]`` -> None."""
    word = text.strip().split(" ")[0]
    try:
        return int(word)
    except ValueError:
        try:
            return float(word)
        except ValueError:
            return None


def parse_gpus(csv_text: str) -> list:
    """Devices from ``nvidia-smi --query-gpu=GPU_QUERY --format=csv`` (header and units
    included; ``noheader``/``nounits`` output reads the same): one dict per device."""
    lines = [line for line in csv_text.splitlines() if line.strip()]
    if lines and lines[0].lstrip().startswith("index"):
        lines = lines[1:]
    gpus = []
    for line in lines:
        # The name is the only field that may hold a comma: it is the middle of the row.
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 5:
            continue
        idx, name, total, used, util = fields[0], ",".join(fields[1:-3]), *fields[-3:]
        if _number(idx) is None:
            continue
        gpus.append({"index": int(idx), "name": name.strip(), "memory_mib": _number(total),
                     "used_mib": _number(used), "utilization": _number(util)})
    return gpus


def pick_free_gpus(gpus: list, n: int) -> list:
    """The ``n`` least loaded free devices (by utilization, then memory in use, then index).
    Raises LookupError, naming each device's load, when fewer than ``n`` are free."""
    if not gpus:
        raise LookupError(f"{n} GPU(s) asked for, but this host has no NVIDIA GPU (no nvidia-smi, or it lists "
                          "none); call with gpus=0 or pick a host with GPUs (`clustertune cluster check NAME`)")

    def free(g) -> bool:
        return (g["used_mib"] or 0) <= FREE_MEMORY_MIB and (g["utilization"] or 0) <= FREE_UTILIZATION

    ranked = sorted((g for g in gpus if free(g)), key=lambda g: (g["utilization"] or 0, g["used_mib"] or 0, g["index"]))
    if len(ranked) < n:
        load = "; ".join(f"GPU {g['index']}: {g['used_mib']} MiB used, {g['utilization']}% busy" for g in gpus)
        raise LookupError(f"{n} GPU(s) asked for, {len(ranked)} free on this host ({load}); wait, or ask for fewer")
    return sorted(g["index"] for g in ranked[:n])


def query_gpus() -> list:
    """This host's devices ([] without nvidia-smi or when it fails: a host without GPUs)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    out = subprocess.run([smi, f"--query-gpu={GPU_QUERY}", "--format=csv"], capture_output=True, text=True)
    return parse_gpus(out.stdout) if out.returncode == 0 else []
