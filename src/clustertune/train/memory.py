"""How much device memory a recipe needs per device, for each training strategy.

The model is built on the meta device (its real structure, no memory, no download beyond the
config), so the parameter count is exact. Per parameter, training with AdamW keeps:

- the weights: 4 bytes (fp32; mixed precision autocasts the compute, the weights stay fp32),
- the gradients: 4 bytes,
- the optimizer state: 8 bytes (AdamW's two moments in fp32),

and each strategy divides some of those by the number of devices ``W`` (or moves them to the
host): DDP keeps all of them on every device; ZeRO-1 shards the optimizer state, ZeRO-2 also the
gradients, ZeRO-3 and FSDP (full shard) everything. Offload moves the optimizer state (and with
``params`` the weights) to host memory.

Activations are an estimate (they depend on kernels, which the arithmetic cannot see): per layer
and token, about ``34·h`` values kept for the backward pass with fused attention (the attention
matrix itself is not kept), ``2·h`` with activation checkpointing (the layer input, plus one
layer's full set during recomputation), plus the logits and their gradient, ``2·V`` per token in
fp32. Mixed precision stores them in 2 bytes, fp32 in 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

GiB = 1024**3
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp", "zero2+offload", "zero3+offload")

# Memory of common GPUs, by a substring of the device name (GiB as vendors state them, in GB).
DEVICE_MEMORY_GB: dict[str, float] = {
    "H200": 141, "H100": 80, "A100-80": 80, "A100": 40, "L40S": 48, "A10G": 24, "RTX 4090": 24, "V100": 32,
}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device (and per host, for offloaded state) under one strategy."""

    strategy: str
    params: int
    grads: int
    optimizer: int
    activations: int
    host: int  # offloaded state, kept in the host's memory (per device's share)

    @property
    def device_total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations


@dataclass(frozen=True)
class ModelShape:
    n_params: int
    layers: int
    hidden: int
    vocab: int


def model_shape(config: Any, task: str) -> ModelShape:
    """Exact parameter count of the model ``config`` describes (built on the meta device)."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    auto = AutoModelForCausalLM if task == "causal_lm" else AutoModelForSequenceClassification
    with torch.device("meta"):
        model = auto.from_config(config)
    # Tied weights are one tensor: count each distinct parameter once, as the optimizer does.
    n = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    layers = _first_int(config, "n_layer", "num_hidden_layers", "num_layers") or 0
    hidden = _first_int(config, "n_embd", "hidden_size", "d_model") or 0
    vocab = _first_int(config, "vocab_size") or 0
    return ModelShape(n, layers, hidden, vocab)


def _first_int(config: Any, *names: str) -> int | None:
    for name in names:
        v = getattr(config, name, None)
        if isinstance(v, int):
            return v
    return None


def activation_bytes(shape: ModelShape, micro_batch: int, seq: int, mixed: bool, checkpointing: bool,
                     causal_lm: bool) -> int:
    tokens = micro_batch * seq
    per_token_layer = (2 if checkpointing else 34) * shape.hidden
    if checkpointing:  # one layer is recomputed in full during its backward
        per_token = shape.layers * per_token_layer + 34 * shape.hidden
    else:
        per_token = shape.layers * per_token_layer
    act = tokens * per_token * (2 if mixed else 4)
    if causal_lm:
        act += tokens * shape.vocab * 2 * 4  # logits and their gradient, in fp32
    return int(act)


def estimate(shape: ModelShape, strategy: str, world: int, activations: int) -> MemoryEstimate:
    """Per-device bytes for ``strategy`` over ``world`` devices (fp32 weights, AdamW)."""
    n, w = shape.n_params, max(1, world)
    p, g, o = 4 * n, 4 * n, 8 * n

    def shard(x: int) -> int:
        return -(-x // w)  # ceil: the first ranks hold the remainder

    host = 0
    if strategy == "ddp":
        pass
    elif strategy == "zero1":
        o = shard(o)
    elif strategy == "zero2":
        g, o = shard(g), shard(o)
    elif strategy in ("zero3", "fsdp"):
        p, g, o = shard(p), shard(g), shard(o)
    elif strategy == "zero2+offload":
        g, host, o = shard(g), shard(o), 0
    elif strategy == "zero3+offload":
        g, host, o, p = shard(g), shard(o) + shard(p), 0, 0
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    return MemoryEstimate(strategy, p, g, o, activations, host)


def estimate_all(recipe: Any, config: Any, world: int, mixed: bool) -> list[MemoryEstimate]:
    shape = model_shape(config, recipe.task)
    seq = recipe.data.block_size if recipe.task == "causal_lm" else recipe.data.max_length
    act = activation_bytes(shape, recipe.train.batch_size, seq, mixed, recipe.train.gradient_checkpointing,
                           recipe.task == "causal_lm")
    return [estimate(shape, s, world, act) for s in STRATEGIES]


def device_memory_bytes(name: str | None = None) -> tuple[str, int] | None:
    """(name, bytes) of a GPU: this machine's first one, else a known name like ``H100``."""
    if name is None:
        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(0)
        return props.name, int(props.total_memory)
    for key, gb in DEVICE_MEMORY_GB.items():
        if key.lower() in name.lower():
            return key, int(gb * 1e9)
    return None


def measured_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of this rank's distinct parameter, gradient and optimizer-state tensors.

    Storages are counted once each (tied weights, views). Sharded tensors (DTensor) count
    their local shard only: what this rank actually holds.
    """

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t

    def total(tensors: list[torch.Tensor]) -> int:
        seen: dict[int, int] = {}
        for t in tensors:
            t = local(t)
            if t.device.type == "meta" or t.numel() == 0:
                continue
            s = t.untyped_storage()
            seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        return sum(seen.values())

    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    state = [v for st in optimizer.state.values() for v in st.values()
             if isinstance(v, torch.Tensor) and v.dim() > 0]  # the step counters are scalars
    return {"params": total(params), "grads": total(grads), "optimizer": total(state)}
