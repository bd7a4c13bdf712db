"""What a rank holds, measured: the bytes of distinct tensors (each storage once) by kind (parameters,
gradients, optimizer state, host), the optimizer's state tensors, QLoRA's quantization state, what
offload moves to the host, and the figures gathered from every rank. :mod:`clustertune.train.memory`
predicts; this measures, and the tests hold the two against each other."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

KINDS = ("params", "grads", "optimizer", "host")


def distinct_bytes(groups: dict[str, Iterable[Any]]) -> dict[str, int]:
    """Bytes of each kind's tensors, every stretch of memory counted once.

    Tensors that share a storage (tied weights, views into one flat buffer, an fp32 master
    copy that is the weights' own partition) count the elements they cover in it once, for the
    first kind (in ``groups``' order) that covers them; the part of a buffer no tensor covers
    (DeepSpeed's gradient buckets hold other ranks' gradients too) is not this rank's state.
    Sharded tensors (DTensor) count their local shard only: what this rank actually holds.
    Meta and empty tensors (released ZeRO-3 weights) count nothing.
    """
    spans: dict[int, list[tuple[int, int, str]]] = {}  # storage -> (start, end, kind) in bytes
    for kind, tensors in groups.items():
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            t = t.to_local() if hasattr(t, "to_local") else t
            if t.device.type == "meta" or t.numel() == 0:
                continue
            start = t.storage_offset() * t.element_size()
            spans.setdefault(t.untyped_storage().data_ptr(), []).append((start, start + t.numel() * t.element_size(), kind))
    out = {k: 0 for k in (*groups, *KINDS)}
    for pieces in spans.values():
        # Earlier kinds claim their stretches first; a later kind counts only what is left.
        claimed: list[tuple[int, int]] = []
        for kind in groups:
            mine = _merge([(a, b) for a, b, k in pieces if k == kind])
            for a, b in mine:
                out[kind] += (b - a) - _overlap(a, b, claimed)
            claimed = _merge(claimed + mine)
    return out


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(a: int, b: int, spans: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, y) - max(a, x)) for x, y in spans)


def optimizer_state_tensors(optimizer: Any) -> list[torch.Tensor]:
    """The optimizer's per-parameter state (moments); the scalar step counters are left out."""
    return [v for st in optimizer.state.values() for v in st.values()
            if isinstance(v, torch.Tensor) and v.dim() > 0]


def measured_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                         extra_grads: Iterable[torch.Tensor] = ()) -> dict[str, int]:
    """Bytes of this rank's distinct parameter, gradient and optimizer-state tensors for a plain
    torch optimizer over the model's parameters (DDP, FSDP; DeepSpeed has its own, see
    strategies/zero.py). ``extra_grads``: gradients held elsewhere than on the parameters."""
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None] + list(extra_grads)
    quant = quant_state_tensors([*params, *model.modules()])
    return distinct_bytes({"params": [*params, *quant], "grads": grads,
                           "optimizer": optimizer_state_tensors(optimizer)})


def quant_state_tensors(holders: Iterable[Any]) -> list[torch.Tensor]:
    """The quantization state bitsandbytes keeps beside 4-bit weights (absmax, code tables), from
    the weights or their layers (where it stays when FSDP replaces the weights by shards): part of
    what holding a QLoRA base costs, though not parameters."""
    out = []
    for h in holders:
        qs = getattr(h, "quant_state", None)
        for state in (qs, getattr(qs, "state2", None)):
            if state is not None:
                out += [v for v in vars(state).values() if isinstance(v, torch.Tensor)]
    return out


def offloaded(held: dict[str, int], kinds: Iterable[str]) -> dict[str, int]:
    """``held`` with the bytes of ``kinds`` moved to host memory (``host_<kind>``), where the
    strategy keeps them; kept apart by kind until held_around_first_step adds them up."""
    out = dict(held)
    for k in kinds:
        out[f"host_{k}"] = out.get(f"host_{k}", 0) + out.get(k, 0)
        out[k] = 0
    return out


def held_around_first_step(*snapshots: dict[str, int]) -> dict[str, int]:
    """The most of each kind a rank held at any of ``snapshots``: between micro-batches, just
    before and just after its first optimizer step (gradients exist before it, torch frees them
    after; optimizer state exists only after it)."""
    most = {k: max(s.get(k, 0) for s in snapshots) for k in set().union(*snapshots)}
    host = sum(v for k, v in most.items() if k.startswith("host"))
    return {"params": most.get("params", 0), "grads": most.get("grads", 0),
            "optimizer": most.get("optimizer", 0), "host": host}


def materialised_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers that have memory (meta tensors have none;
    a ZeRO-3 parameter built into its partitions holds only this rank's part): what building
    the model left in this rank's host memory."""
    params = list(model.parameters())
    parts = [p.ds_tensor for p in params if getattr(p, "ds_tensor", None) is not None]
    return distinct_bytes({"params": [*params, *parts, *model.buffers()]})["params"]


def gather_per_rank(strategy: Any, held: dict[str, int]) -> list[dict[str, int]]:
    """Every rank's ``held`` (the same keys on every rank), in rank order, on every rank (a
    collective: all ranks call it)."""
    keys = list(held)
    rows = torch.zeros(strategy.num_processes, len(keys), dtype=torch.int64, device=strategy.device)
    rows[strategy.process_index] = torch.tensor([held[k] for k in keys], dtype=torch.int64)
    rows = strategy.reduce(rows, reduction="sum")
    return [dict(zip(keys, (int(v) for v in row))) for row in rows.tolist()]
