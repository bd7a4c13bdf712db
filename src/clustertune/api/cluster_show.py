"""``clustertune cluster show NAME``: what a cluster offers a run, as one table: on SLURM its
partitions (nodes, state, MaxTime, MaxNodes, GPU types and counts) and a compute node's
environment; on SSH each host's Python, GPUs and disk. For each partition or host, what fits:
the largest model of a Llama-shaped ladder that each shipped recipe's way of training (its task,
strategy, precision, micro-batch and sequence length) holds on one of its GPUs, by the estimator.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.api.cluster_check import gpu_bytes_of
from clustertune.api.node_check import node_facts
from clustertune.api.cluster_fit import USABLE
from clustertune.data.cache import cache_root
from clustertune.launch import slurm_facts
from clustertune.launch.plan import LaunchPlan, build_plan
from clustertune.recipe.load import load_recipe, shipped_recipes
from clustertune.recipe.schema import Recipe
from clustertune.remote.cluster import Cluster
from clustertune.train import memory

# Llama-shaped sizes (hidden, layers, MLP width, heads, key/value heads; a 128k vocabulary), as the
# Llama 3 family and its smaller peers (SmolLM, Qwen2.5) ship them.
LADDER: dict[str, tuple[int, int, int, int, int]] = {
    "135M": (576, 30, 1536, 9, 3), "0.5B": (896, 24, 4864, 14, 2), "1B": (2048, 16, 8192, 32, 8),
    "3B": (3072, 28, 8192, 24, 8), "8B": (4096, 32, 14336, 32, 8), "14B": (5120, 48, 13824, 40, 8),
    "32B": (5120, 64, 27648, 40, 8), "70B": (8192, 80, 28672, 64, 8),
}


def _sized(recipe: Recipe, size: str) -> Recipe:
    """``recipe``'s way of training on a fresh Llama of ``size`` (a copy: the estimate needs the
    shape only, so no weights, tokenizer or hub)."""
    h, n, mlp, heads, kv = LADDER[size]
    model = recipe.model.model_copy(update={
        "config": "llama", "name_or_path": None, "tokenizer": "train", "tokenizer_vocab_size": 128256,
        "config_overrides": {"hidden_size": h, "num_hidden_layers": n, "intermediate_size": mlp,
                             "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": 128256}})
    return recipe.model_copy(update={"model": model})


@dataclass(frozen=True)
class Shape:
    recipes: tuple[str, ...]  # the shipped recipes that train this way
    recipe: Recipe


def training_shapes() -> list[Shape]:
    """The shipped recipes that train with the loop, one per distinct way of training."""
    seen: dict[tuple, list[str]] = {}
    first: dict[tuple, Recipe] = {}
    for name, path in shipped_recipes().items():
        r = load_recipe(path)
        if r.rl is not None:
            continue  # TRL's trainers hold a policy, a reference and a reward model: not one ladder
        key = (r.traits.head, memory.strategy_key(r.train), r.train.precision in ("bf16", "fp16", "auto"),
               r.train.batch_size, r.sequence_length, r.train.gradient_checkpointing, r.model.adapter is not None)
        seen.setdefault(key, []).append(name)
        first.setdefault(key, r)
    return [Shape(tuple(names), first[k]) for k, names in seen.items()]


def largest_fitting(shape: Shape, gpu_bytes: int, cache: dict[tuple[str, str], int]) -> str | None:
    """The largest ladder size whose per-GPU need (one rank) fits ``gpu_bytes``; None: not even 1B.
    Needs are monotone in size, so the ladder is searched by halves; ``cache`` keeps each estimate."""
    sizes = list(LADDER)
    lo, hi, best = 0, len(sizes) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        key = (shape.recipes[0], sizes[mid])
        if key not in cache:
            _, _, _, rows = memory.estimate_recipe(_sized(shape.recipe, sizes[mid]), 1,
                                                   [memory.strategy_key(shape.recipe.train)])
            cache[key] = rows[0].device_total
        if cache[key] <= USABLE * gpu_bytes:
            best, lo = sizes[mid], mid + 1
        else:
            hi = mid - 1
    return best


def fits_table(gpus: dict[str, int | None]) -> list[dict[str, Any]]:
    """Per place (partition or host) with a GPU of known memory: each shape's largest model."""
    shapes, cache = training_shapes(), {}
    rows = []
    for shape in shapes:
        row: dict[str, Any] = {"recipes": list(shape.recipes), "strategy": memory.strategy_key(shape.recipe.train),
                               "precision": shape.recipe.train.precision, "batch_size": shape.recipe.train.batch_size,
                               "sequence_length": shape.recipe.sequence_length}
        for place, gpu_bytes in gpus.items():
            row[place] = largest_fitting(shape, gpu_bytes, cache) if gpu_bytes else None
        rows.append(row)
    return rows


def _probe_plan(partition: str, gpu_type: str | None, count: int) -> LaunchPlan:
    launch = {"backend": "slurm", "partition": partition}
    if count:
        launch.update(gpus_per_node=1, **({"gpu_type": gpu_type} if gpu_type else {}))
    recipe = load_recipe({"name": "probe", "model": {"name_or_path": "probe"}, "data": {"dataset": "builtin:pydoc"},
                          "launch": launch})
    return build_plan(recipe, "probe", str(Path.cwd()), sys.executable, ())


def show_slurm(refresh: bool = False, probe: bool = True) -> dict[str, Any]:
    cluster = slurm_facts.read_cluster()
    parts, gpus = [], {}
    for p in cluster.partitions.values():
        nodes = cluster.nodes_of(p)
        kinds: dict[str, int] = {}
        for n in nodes:
            for kind, count in n.gpus.items():
                kinds[kind or "gpu"] = max(kinds.get(kind or "gpu", 0), count)
        kind = next(iter(kinds), None)
        facts = None
        if probe and p.state == "UP":
            facts, _, _ = node_facts(cluster.name, _probe_plan(p.name, kind if kind != "gpu" else None,
                                                               kinds.get(kind, 0) if kind else 0),
                                     cache_root(), refresh)
        gpu = gpu_bytes_of(kind, (facts or {}).get("gpus")) if kind else None
        gpus[p.name] = gpu[1] if gpu else None
        parts.append({"partition": p.name, "default": p.default, "state": p.state, "nodes": len(nodes),
                      "max_time_min": p.max_time_min, "max_nodes": p.max_nodes,
                      "gpus_per_node": kinds, "gpu_memory_gib": round(gpu[1] / 2**30, 1) if gpu else None,
                      "environment": facts})
    return {"backend": "slurm", "cluster": cluster.name, "version": cluster.version, "partitions": parts,
            "fits": fits_table(gpus)}


def show_ssh(name: str) -> dict[str, Any]:
    rows = Cluster.named(name).check()
    gpus = {}
    for r in rows:
        found = r.get("gpus") or []
        mib = min((int(g.get("memory_mib") or 0) for g in found), default=0)
        gpus[r["host"]] = mib * 2**20 if mib else None
    return {"backend": "ssh", "cluster": name, "hosts": rows, "fits": fits_table(gpus)}
