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


def build_config(t: TrainSection, world_size: int | None, mixed_precision: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The config for ``t`` at ``world_size``, and for each dotted key the recipe key behind it.
    Without a world size (checks before launch) ``train_batch_size`` is left out; without a
    precision (``auto``, decided on the node) the precision keys are not compared."""
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
        **({"bf16.enabled": "train.precision", "fp16.enabled": "train.precision"} if mixed_precision else {}),
        "gradient_clipping": "train.max_grad_norm",
    })
    return cfg, origin


# Optimizer types DeepSpeed configs name that are the recipe's AdamW (DeepSpeed's "Adam" is
# AdamW unless adam_w_mode is false).
ADAMW_TYPES = ("adamw", "adam")


def normalize_user_config(user: dict[str, Any], t: TrainSection, path: str) -> dict[str, Any]:
    """Legacy spellings mapped onto what they mean, and the blocks the recipe's own loop would
    silently ignore refused, each naming the recipe key to use instead."""
    user = json.loads(json.dumps(user))  # a copy
    refusals: list[str] = []
    zero = user.get("zero_optimization")
    if isinstance(zero, bool):
        # DeepSpeed reads `true` as stage 1 (and `false` as stage 0), whatever the recipe says.
        meant = 1 if zero else 0
        if meant != t.effective_zero_stage:
            refusals.append(f"zero_optimization: {json.dumps(zero)} means ZeRO stage {meant} to DeepSpeed, but the "
                            f"recipe trains with stage {t.effective_zero_stage} (train.zero_stage); write "
                            f'"zero_optimization": {{"stage": {t.effective_zero_stage}}} or set train.zero_stage={meant}')
        user["zero_optimization"] = zero = {"stage": meant}
    if isinstance(zero, dict) and "cpu_offload" in zero:
        # The legacy switch: optimizer state (and its step) in host memory.
        if zero.pop("cpu_offload") is True:
            zero.setdefault("offload_optimizer", {"device": "cpu"})
    if "scheduler" in user:
        refusals.append("scheduler: the recipe's schedule runs (train.lr_scheduler, train.warmup_steps, "
                        "train.lr; WarmupDecayLR is lr_scheduler=linear, WarmupLR is constant with warmup); "
                        "set those and remove the block")
    opt = user.get("optimizer")
    if isinstance(opt, dict) and isinstance(opt.get("type"), str):
        params = opt.get("params") or {}
        if opt["type"].lower() in ADAMW_TYPES and params.get("adam_w_mode", True) is not False:
            opt["type"] = "AdamW"
        else:
            refusals.append(f"optimizer.type: {opt['type']!r}: clustertune steps AdamW (train.lr, train.adam_beta1, "
                            "train.adam_beta2, train.adam_eps, train.weight_decay); remove the optimizer block "
                            "or make it AdamW")
    if refusals:
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path}:\n  - " + "\n  - ".join(refusals))
    return user


def read_user_config(path: str) -> dict[str, Any]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path!r} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path!r} is not valid JSON: {exc} (JSON writes "
                                   "true/false/null, quotes keys with \", and allows no trailing commas)") from exc
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


def deepspeed_config(recipe: Recipe, world_size: int | None, mixed_precision: str | None) -> dict[str, Any]:
    """The recipe's config with the user's JSON (if any) merged over it; contradictions raise."""
    t = recipe.train
    cfg, origin = build_config(t, world_size, mixed_precision)
    if t.deepspeed_config:
        user = normalize_user_config(read_user_config(t.deepspeed_config), t, t.deepspeed_config)
        cfg = merge_user_config(cfg, origin, user, t.deepspeed_config)
    return cfg


def check_deepspeed_json(recipe: Recipe) -> None:
    """Before anything is submitted (validate, dry run, launch): the user's JSON parses and
    agrees with the recipe. Precision ``auto`` is decided on the node, so not compared here."""
    t = recipe.train
    if t.strategy == "deepspeed" and t.deepspeed_config:
        deepspeed_config(recipe, None, {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}.get(t.precision))
