"""Throughput figures: tokens/s and model FLOPs utilisation (MFU).

FLOPs per token follow nanoGPT's estimate: 6N for the dense layers (forward + backward) plus
12·L·H·Q·T for attention, with N the parameters minus position embeddings.
"""

from __future__ import annotations

from typing import Any

import torch

# Dense bf16/fp16 tensor-core peaks (FLOP/s) by a substring of the device name.
# The first key found in the name wins: variants come before the family ("H100 PCIe" before
# "H100", "A100" and "A10G" before "A10").
PEAK_FLOPS: dict[str, float] = {
    "B200": 2250e12,
    "H200": 989e12,
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,  # SXM
    "A100": 312e12,
    "L40S": 362e12,
    "A10G": 70e12,
    "A10": 125e12,
    "L4": 121e12,
    "RTX 4090": 165e12,
    "V100": 125e12,
}


def device_peak_flops(override: float | None = None) -> float | None:
    """Peak FLOP/s of this process's device: the override, a known GPU, or None (CPU, unknown)."""
    if override:
        return override
    if not torch.cuda.is_available():
        return None
    return peak_flops_of(torch.cuda.get_device_name())


def peak_flops_of(name: str) -> float | None:
    """Dense bf16 peak of a GPU by its name (``torch.cuda.get_device_name``), when known."""
    for key, peak in PEAK_FLOPS.items():
        if key in name:
            return peak
    return None


def _cfg(config: Any, *names: str) -> int | None:
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, int):
            return v
    return None


def whole_numel(t: torch.Tensor) -> int:
    """Elements of the whole tensor, also where ZeRO-3 left this rank a partition of it."""
    return int(getattr(t, "ds_numel", None) or t.numel())


def parameter_count(model: torch.nn.Module) -> int:
    """The model's parameters, each counted whole (tied ones once), partitioned or not."""
    return sum(whole_numel(p) for p in model.parameters())


def flops_per_token(model: Any, seq_len: int) -> float:
    """6N + 12·L·H·Q·T for one token of a training step (forward and backward)."""
    config = model.config
    n_params = parameter_count(model)
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Embedding) and any(k in name.split(".")[-1] for k in ("wpe", "position")):
            n_params -= whole_numel(mod.weight)
    layers = _cfg(config, "n_layer", "num_hidden_layers") or 0
    heads = _cfg(config, "n_head", "num_attention_heads") or 1
    hidden = _cfg(config, "n_embd", "hidden_size", "d_model") or 0
    head_dim = _cfg(config, "head_dim") or (hidden // heads if heads else 0)
    return 6.0 * n_params + 12.0 * layers * heads * head_dim * seq_len


def mfu(tokens_per_s_per_device: float, flops_tok: float, peak: float | None) -> float | None:
    if not peak:
        return None
    return tokens_per_s_per_device * flops_tok / peak
