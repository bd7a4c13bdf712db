"""The DeepSpeed config a recipe implies, and a user's own JSON merged over it.

Pure data: nothing here imports DeepSpeed, so configs are built and checked (and tested)
on machines without it. The recipe owns a few keys (batch sizes, stage, offload, precision,
optimizer hyperparameters, clipping); a user file may add any other key, may say ``"auto"``
for an owned one, and may repeat an owned one with the same value, but a different value
is a contradiction, reported key by key with both values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.recipe.schema import Recipe, TrainSection


class DeepSpeedConfigError(UserError):
    """A DeepSpeed JSON that is unreadable or contradicts the recipe."""


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def build_config(t: TrainSection, world_size: int | None, mixed_precision: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The config for ``t`` at ``world_size``, and for each dotted key the recipe key behind it.
    Without a world size (checks before launch) ``train_batch_size`` is left out."""
    stage, offload = t.effective_zero_stage, t.effective_offload
    zero: dict[str, Any] = {"stage": stage}
    origin = {"zero_optimization.stage": "train.zero_stage"}
    # Offloaded state moves between host and GPU every step: page-locked host memory makes
    # those copies DMA transfers. (Without a GPU there is nothing to pin for.)
    pin = _cuda()
    if offload in ("optimizer", "params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": pin}
        origin["zero_optimization.offload_optimizer.device"] = "train.offload"
    if offload == "params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": pin}
        origin["zero_optimization.offload_param.device"] = "train.offload"
    if stage == 3:
        # The final model is gathered from the shards in 16 bits where training ran in 16 bits.
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": t.batch_size,
        "gradient_accumulation_steps": t.gradient_accumulation_steps,
        "zero_optimization": zero,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": t.lr, "betas": [t.adam_beta1, t.adam_beta2], "eps": t.adam_eps,
                       "weight_decay": t.weight_decay,
                       # Offloaded optimizer steps run in DeepSpeed's CPU Adam; the others in
                       # torch's AdamW, which needs no compiled DeepSpeed ops.
                       "torch_adam": offload == "none"},
        },
        "bf16": {"enabled": mixed_precision == "bf16"},
        "fp16": {"enabled": mixed_precision == "fp16"},
        "gradient_clipping": t.max_grad_norm or 0.0,
        "steps_per_print": 1 << 30,  # progress is ours; DeepSpeed's own prints are noise
        "wall_clock_breakdown": False,
    }
    if world_size is not None:
        cfg["train_batch_size"] = t.batch_size * t.gradient_accumulation_steps * world_size
    origin.update({
        "train_micro_batch_size_per_gpu": "train.batch_size",
        "gradient_accumulation_steps": "train.gradient_accumulation_steps",
        **({"train_batch_size": "train.batch_size x train.gradient_accumulation_steps x processes"}
           if world_size is not None else {}),
        "optimizer.type": "AdamW (the recipe's optimizer)",
        "optimizer.params.lr": "train.lr",
        "optimizer.params.betas": "train.adam_beta1/adam_beta2",
        "optimizer.params.eps": "train.adam_eps",
        "optimizer.params.weight_decay": "train.weight_decay",
        "bf16.enabled": "train.precision",
        "fp16.enabled": "train.precision",
        "gradient_clipping": "train.max_grad_norm",
    })
    return cfg, origin


def read_user_config(path: str) -> dict[str, Any]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path!r} must hold a JSON object")
    return data


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    return bool(a == b)


def merge_user_config(built: dict[str, Any], origin: dict[str, str], user: dict[str, Any], path: str) -> dict[str, Any]:
    """``user`` deep-merged over ``built``; DeepSpeedConfigError lists every contradicted key."""
    flat_built, flat_user = _flatten(built), _flatten(user)
    clashes = []
    for key, theirs in sorted(flat_user.items()):
        if key in origin and theirs != "auto" and not _same(theirs, flat_built.get(key)):
            clashes.append(f"{key}: {theirs!r} in {path}, but {flat_built.get(key)!r} from {origin[key]}")
    # A user file that turns offload on or off by itself contradicts train.offload too.
    for section in ("offload_optimizer", "offload_param"):
        key = f"zero_optimization.{section}.device"
        if key in flat_user and key not in origin and flat_user[key] not in ("none", None, "auto"):
            clashes.append(f"{key}: {flat_user[key]!r} in {path}, but train.offload is {built_offload(built)!r}")
    if clashes:
        raise DeepSpeedConfigError(
            "train.deepspeed_config contradicts the recipe:\n  - " + "\n  - ".join(clashes)
            + "\nset these in the recipe (or remove them from the JSON, or write \"auto\")"
        )
    return _deep_merge(built, user)


def built_offload(built: dict[str, Any]) -> str:
    zero = built.get("zero_optimization", {})
    if "offload_param" in zero:
        return "params"
    return "optimizer" if "offload_optimizer" in zero else "none"


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if v == "auto" and k in out:
            continue  # "auto" means: the value clustertune derives from the recipe
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def deepspeed_config(recipe: Recipe, world_size: int | None, mixed_precision: str) -> dict[str, Any]:
    """The recipe's config with the user's JSON (if any) merged over it; contradictions raise."""
    t = recipe.train
    cfg, origin = build_config(t, world_size, mixed_precision)
    if t.deepspeed_config:
        cfg = merge_user_config(cfg, origin, read_user_config(t.deepspeed_config), t.deepspeed_config)
    return cfg
