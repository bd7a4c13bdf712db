"""The weights a checkpoint keeps: those that train.

A fully trained model is saved whole (``save_model``: tied weights once, buffers included). A
model with frozen parameters (an adapter on a frozen base) is saved as its trainable
parameters only, by name: the frozen ones come back from the base when the model is built
again, so a checkpoint of a LoRA run is megabytes, not the base's gigabytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from clustertune.errors import CheckpointError


def trainable_parameters(module: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """Trainable parameters by name; None when every parameter trains (save the whole model)."""
    params = dict(module.named_parameters())
    trainable = {n: p for n, p in params.items() if p.requires_grad}
    return None if len(trainable) == len(params) else trainable


def save_weights(module: torch.nn.Module, path: Path) -> None:
    from safetensors.torch import save_file, save_model

    trainable = trainable_parameters(module)
    if trainable is None:
        save_model(module, str(path))
        return
    save_file({n: p.detach().contiguous().cpu() for n, p in trainable.items()}, str(path))


def load_weights(module: torch.nn.Module, path: Path) -> None:
    from safetensors.torch import load_file, load_model

    trainable = trainable_parameters(module)
    if trainable is None:
        # A file gathered from shards may name a tied weight twice (lm_head and the embedding):
        # safetensors counts the second name as unexpected; any other extra or missing name is not.
        missing, unexpected = load_model(module, str(path), strict=False)
        known = set(module.state_dict())
        if missing or set(unexpected) - known:
            raise CheckpointError(f"checkpoint weights {path} do not fit this model (missing: {sorted(missing)[:5]}; "
                                  f"not in the model: {sorted(set(unexpected) - known)[:5]})")
        return
    saved = load_file(str(path))
    if set(saved) != set(trainable):
        extra, missing = sorted(set(saved) - set(trainable)), sorted(set(trainable) - set(saved))
        raise CheckpointError(f"checkpoint weights {path} do not fit this model's trainable parameters "
                              f"(only in the checkpoint: {extra[:5]}; missing from it: {missing[:5]})")
    with torch.no_grad():
        for name, tensor in saved.items():
            _copy(trainable[name], tensor, name, path)


def _copy(param: Any, tensor: torch.Tensor, name: str, path: Path) -> None:
    if param.shape != tensor.shape:
        raise CheckpointError(f"checkpoint weights {path}: {name} has shape {tuple(tensor.shape)}, this model's "
                              f"{tuple(param.shape)}")
    param.copy_(tensor.to(param.device, param.dtype))
