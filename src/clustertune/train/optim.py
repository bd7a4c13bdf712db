"""The optimizer a recipe names, weight decay on matrices only (the schedule: :mod:`train.schedule`)."""

from __future__ import annotations

from typing import Any

import torch

from clustertune.errors import OptimizerError
from clustertune.extras import install_hint
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
    """The optimizer ``train.optimizer`` names, over the trainable parameters in two groups."""
    t = recipe.train
    groups = param_groups(model, t.weight_decay)
    if t.optimizer == "adamw":
        # One fused kernel for every parameter instead of a loop of small ones.
        extra = {"fused": True} if use_fused_adamw(recipe) else {}
        return torch.optim.AdamW(groups, lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps, **extra)
    if t.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=t.lr, momentum=t.momentum)
    if t.optimizer == "adafactor":
        from transformers.optimization import Adafactor

        # The learning rate comes from train.lr and the schedule, as for the others.
        return Adafactor(groups, lr=t.lr, scale_parameter=False, relative_step=False, warmup_init=False)
    return _bitsandbytes(recipe, groups)


def _bitsandbytes(recipe: Recipe, groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
    t = recipe.train
    on_cpu = not any(p.is_cuda for g in groups for p in g["params"])
    if t.optimizer == "paged_adamw_8bit" and on_cpu:
        raise OptimizerError("train.optimizer: paged_adamw_8bit pages its state between GPU and host memory; on the "
                         "CPU there is nothing to page: use adamw_8bit (the same 8-bit state, unpaged)")
    try:
        import bitsandbytes as bnb
    except ImportError:
        raise OptimizerError(f"train.optimizer: {t.optimizer} needs bitsandbytes: {install_hint('qlora')}") from None
    cls = bnb.optim.PagedAdamW8bit if t.optimizer == "paged_adamw_8bit" else bnb.optim.AdamW8bit
    return cls(groups, lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps)
