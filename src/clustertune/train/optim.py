"""AdamW with decoupled weight decay on matrices only (the schedule: :mod:`train.schedule`)."""

from __future__ import annotations

from typing import Any

import torch

from clustertune.recipe.schema import Recipe
from clustertune.train.fastpath import use_fused_adamw


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on matrices only; never on biases, norms or other 1-D parameters."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(recipe: Recipe, model: torch.nn.Module) -> torch.optim.Optimizer:
    t = recipe.train
    # One fused kernel for every parameter instead of a loop of small ones.
    extra = {"fused": True} if use_fused_adamw(recipe) else {}
    return torch.optim.AdamW(param_groups(model, t.weight_decay), lr=t.lr, betas=(t.adam_beta1, t.adam_beta2),
                             eps=t.adam_eps, **extra)
