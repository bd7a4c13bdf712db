"""A compute node's own answers, read against this machine and the recipe: its Python, torch,
transformers and clustertune against this machine's, its GPUs against the recipe's precision and
attention kernel, the libraries the recipe's choices load, and what it sees of the paths and hub
models the run reads. The probe step that asks (:mod:`clustertune.launch.node_probe`) is run once
per cluster, partition and environment, and its answer kept for a day in the data cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clustertune.fsutil import atomic_write_text
from clustertune.launch import slurm_facts
from clustertune.launch.files import IN_PLACE, Placed
from clustertune.launch.plan import LaunchPlan
from clustertune.recipe.launch_checks import gpus_requested
from clustertune.recipe.run_refs import is_run_ref
from clustertune.recipe.schema import Recipe

Status = Literal["ok", "problem", "note", "not checked"]
PROBE_TTL_S = 24 * 3600
# A partition with no node free (srun --immediate gave up) is not waited for again this long: a busy
# cluster would otherwise cost every run and dry run the probe's wait.
BUSY_TTL_S = 3600
PROBES_DIR = "cluster-probes"  # under the data cache root, beside the prepared data
SUBMITTER_ENV = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE",
                 "XDG_CACHE_HOME", "LD_LIBRARY_PATH")


def gpus_asked(plan: LaunchPlan) -> tuple[str | None, int]:
    """(the GPU type, GPUs per node) the job asks SLURM for; (None, 0) for a CPU job."""
    s = plan.slurm
    # The count by the launch section's own rule (SlurmOptions carries the same three keys); the
    # type from launch.gpu_type, else the one --gres names.
    count = gpus_requested(s) or 0  # type: ignore[arg-type]
    kind = s.gpu_type or next((k for k in slurm_facts.gpus_of_gres(s.gres or "") if k), None)
    return kind, count


@dataclass(frozen=True)
class Finding:
    status: Status
    what: str  # the check: "partition", "time", "gpus", "memory", "node environment", ...
    said: str  # what was found, with the fix where there is a problem




@dataclass(frozen=True)
class Reads:
    """What a run reads on the nodes: paths the nodes must see where they are (read in place), and
    hub models (a node without internet needs them in its own hub cache)."""

    paths: tuple[str, ...] = ()
    hub: tuple[str, ...] = ()

    @classmethod
    def of(cls, recipe: Recipe | None, placed: tuple[Placed, ...]) -> Reads:
        paths = tuple(p.path for p in placed if p.how == IN_PLACE)
        if recipe is None:
            return cls(paths)
        m = recipe.model
        names = [m.name_or_path, m.tokenizer if m.tokenizer != "train" else None]
        hub = tuple(dict.fromkeys(n for n in names if n and not is_run_ref(n) and not n.startswith(("/", ".", "~"))
                                  and not Path(n).exists()))
        return cls(paths, hub)


def _probe_key(cluster: str, plan: LaunchPlan, reads: Reads) -> str:
    s = plan.slurm
    what = [cluster, s.partition, s.account, s.qos, s.constraint, gpus_asked(plan)[0], plan.python,
            list(plan.setup), list(plan.env), list(reads.paths), list(reads.hub),
            # The job takes this environment along (--export=ALL): what of it changes the answer.
            [os.environ.get(k) for k in SUBMITTER_ENV]]
    return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()[:16]


def node_facts(cluster: str, plan: LaunchPlan, cache: Path, refresh: bool,
               reads: Reads = Reads()) -> tuple[dict | None, slurm_facts.Probe, bool]:
    """The probe's facts (None: it did not answer), the probe itself (what srun said), and whether
    the facts came from the day's cache. Only an answer that found every path and model it was
    asked about is kept (a missing one may be copied there within the hour)."""
    path = cache / PROBES_DIR / f"{cluster}-{_probe_key(cluster, plan, reads)}.json"
    if not refresh and path.is_file():
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            age = time.time() - float(kept["time"])
            if kept.get("facts") is not None and age < PROBE_TTL_S:
                return kept["facts"], slurm_facts.Probe(kept["facts"], ""), True
            if kept.get("busy") and age < BUSY_TTL_S:  # no node was free a moment ago: not waited for again
                return None, slurm_facts.Probe(None, str(kept["busy"])), True
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable: probe again
    found = slurm_facts.probe(plan, list(reads.paths), list(reads.hub))
    complete = found.facts is not None and all((found.facts.get("paths") or {}).values()) and (
        found.facts.get("online") or all((found.facts.get("hub") or {}).values()))
    if complete or found.busy:
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = {"facts": found.facts} if complete else {"busy": found.said}
        atomic_write_text(path, json.dumps({"time": time.time(), **kept}))
    return found.facts, found, False


def environment_findings(node: dict, here: dict, recipe: Recipe | None, gpus_wanted: bool) -> list[Finding]:
    """The node's facts against this machine's and against what the recipe needs."""
    out: list[Finding] = []
    name = node.get("node") or "the node"
    mismatch = []
    py_node, py_here = str(node.get("python", "")), str(here.get("python", ""))
    if py_node.rsplit(".", 1)[0] != py_here.rsplit(".", 1)[0]:
        mismatch.append(f"Python {py_node} there, {py_here} here")
    for dist in ("torch", "transformers", "clustertune"):
        there, mine = node.get(dist), here.get(dist)
        if there is None and mine is not None:
            mismatch.append(f"no {dist} there ({mine} here)")
        elif there != mine:
            mismatch.append(f"{dist} {there} there, {mine} here")
    if mismatch:
        out.append(Finding("problem", "node environment",
                           f"{name} runs {node.get('executable')}: {'; '.join(mismatch)}. The ranks import what the "
                           "node has: install the same versions there (or activate the same environment in "
                           "launch.setup)"))
    gpus = node.get("gpus")
    if gpus_wanted and not gpus:
        out.append(Finding("problem", "node environment",
                           f"{name} has no nvidia-smi (no NVIDIA driver) although the run asks for GPUs"))
    if isinstance(gpus, list):
        errors = [g["error"] for g in gpus if "error" in g]
        if errors:
            out.append(Finding("problem", "node environment", f"{name}: {errors[0]}"))
        old = [g for g in gpus if "error" not in g and _capability(g) < 8.0]
        if recipe is not None and recipe.train.precision == "bf16" and old:
            out.append(Finding("problem", "precision",
                               f"train.precision=bf16 needs compute capability 8.0 or newer; {name}'s "
                               f"{old[0]['name']} has {old[0]['compute_capability']}: set train.precision=fp16"))
        if recipe is not None and recipe.model.attn_implementation == "flash_attention_2" and old:
            out.append(Finding("problem", "model.attn_implementation",
                               f"flash_attention_2 needs compute capability 8.0 or newer; {name}'s {old[0]['name']} "
                               f"has {old[0]['compute_capability']}: set model.attn_implementation=sdpa"))
    out += _libraries(node, name, recipe)
    kinds = Counter(f"{g.get('name')} (compute capability {g.get('compute_capability')}, {g.get('memory_mib')} MiB, "
                    f"driver {g.get('driver')})" for g in gpus or [] if "error" not in g)
    gpu_text = ", ".join(f"{n} x {k}" for k, n in kinds.items()) or "no GPU"
    out.insert(0, Finding("ok" if not mismatch else "note", "node environment",
                          f"{name}: Python {node.get('python')}, torch {node.get('torch')} (CUDA runtime "
                          f"{node.get('cuda_runtime') or '-'}), transformers {node.get('transformers')}, "
                          f"clustertune {node.get('clustertune')}, glibc {node.get('glibc')}, {gpu_text}"))
    return out


def _libraries(node: dict, name: str, recipe: Recipe | None) -> list[Finding]:
    """The libraries the recipe's own choices load on the ranks, present on the node."""
    if recipe is None:
        return []
    wants = []
    if recipe.model.attn_implementation == "flash_attention_2":
        wants.append(("flash_attn", "model.attn_implementation=flash_attention_2", "flash-attn"))
    adapter = recipe.model.adapter
    if adapter is not None and adapter.type == "qlora":
        wants.append(("bitsandbytes", "model.adapter.type=qlora", "bitsandbytes"))
    if "8bit" in recipe.train.optimizer:
        wants.append(("bitsandbytes", f"train.optimizer={recipe.train.optimizer}", "bitsandbytes"))
    return [Finding("problem", "node environment", f"{key} loads {dist} on the ranks, and {name}'s Python has none: "
                                                   f"install {dist} there (or activate an environment that has it in "
                                                   "launch.setup)")
            for field_, key, dist in wants if node.get(field_) is None]


def _capability(gpu: dict) -> float:
    try:
        return float(gpu.get("compute_capability") or 0)
    except ValueError:
        return 0.0


def files_findings(node: dict, reads: Reads, placed: tuple[Placed, ...]) -> list[Finding]:
    """What the run reads, as the node sees it: the paths read in place there, the hub models (on
    a node without internet, from its hub cache), and the rest, which travels with the run."""
    out: list[Finding] = []
    name = node.get("node") or "the node"
    seen = node.get("paths") or {}
    missing = [p for p in placed if p.how == IN_PLACE and seen.get(p.path) is False]
    for p in missing:
        out.append(Finding("problem", "files", f"{p.key}: {p.path} is read in place on the nodes, but {name} does not "
                                               "see it: put it on a filesystem the nodes mount, or drop it from "
                                               "launch.node_visible so it is sent with the run"))
    visible = [p for p in placed if p.how == IN_PLACE and seen.get(p.path)]
    sent = [p for p in placed if p.how != IN_PLACE]
    if visible or sent:
        out.append(Finding("ok", "files", "; ".join(
            ([f"{name} sees {', '.join(p.key for p in visible)} in place"] if visible else [])
            + ([f"{', '.join(p.key for p in sent)} sent with the run"] if sent else []))))
    for model, cached in (node.get("hub") or {}).items():
        if node.get("online"):
            out.append(Finding("ok", "files", f"{model}: {name} reaches the hub"))
        elif cached:
            out.append(Finding("ok", "files", f"{model}: {name} has no internet; its hub cache "
                                              f"({node.get('hub_cache')}) holds it"))
        else:
            out.append(Finding("problem", "files", f"{model}: {name} has no internet and its hub cache "
                                                   f"({node.get('hub_cache')}) lacks it: on a machine with internet, "
                                                   "`clustertune fetch RECIPE --store DIR` (DIR where the nodes see "
                                                   "it) and run the recipe it writes"))
    return out
