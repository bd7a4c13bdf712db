"""The DeepSpeed config a run trains with: the recipe's own, or a user's JSON.

Pure data: nothing here imports DeepSpeed, so configs are built and checked (and tested)
on machines without it. Without a JSON the recipe says everything. With one
(``train.deepspeed_config``) the recipe is first resolved against it (recipe/ds_json.py: the
JSON is the source of truth; a key the user set may restate it, not contradict it):
:func:`resolve_deepspeed_json` does that before anything is submitted, with the plan's number
of processes, and checks the config as the nodes will build it, so ``validate`` equals ``run``.
The JSON's ``"auto"`` values are filled from that recipe as Hugging Face's integration fills
them (optimizer and scheduler values, step counts, ZeRO bucket sizes from the hidden size); the
keys the loop owns (batch sizes, clipping, precision) are compared once more on the nodes.
"""

from __future__ import annotations

import json
from typing import Any

from clustertune.recipe.schema import Recipe, TrainSection, warmup_steps
from clustertune.recipe.ds_json import (
    DeepSpeedConfigError,
    Resolved,
    adopt_json,
    normalize_user_config,
    read_user_config,
    same_value,
    with_deepspeed_json,
)

# Also the names of a user's JSON that the nodes and tests take from here.
__all__ = ["DeepSpeedConfigError", "Resolved", "build_config", "deepspeed_config", "merge_user_config",
           "resolve_deepspeed_json", "with_deepspeed_json"]


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


# Optimizer types DeepSpeed configs name that are AdamW (DeepSpeed's "Adam" is AdamW unless
# adam_w_mode is false).
ADAMW_TYPES = ("adamw", "adam")


# DeepSpeed optimizer types that exist only as CUDA kernels (no CPU path, whatever the offload).
CUDA_ONLY_OPTIMIZERS = {"lamb": "Lamb", "onebitadam": "OneBitAdam", "onebitlamb": "OneBitLamb",
                        "zerooneadam": "ZeroOneAdam"}
# Optimizer types DeepSpeed itself builds (the rest are torch.optim class names: SGD, RMSprop...).
DEEPSPEED_OPTIMIZERS = ("adam", "adamw", "adagrad", "lamb", "onebitadam", "onebitlamb", "zerooneadam",
                        "lion", "muadam", "muadamw", "musgd", "muon")
# ZeRO sizes that "auto" derives from the model's hidden size, as Hugging Face's integration does.
HIDDEN_SIZE_AUTO = {
    "zero_optimization.reduce_bucket_size": lambda h: h * h,
    "zero_optimization.stage3_prefetch_bucket_size": lambda h: int(0.9 * h * h),
    "zero_optimization.stage3_param_persistence_threshold": lambda h: 10 * h,
}


def _optimizer_block(opt: Any, t: TrainSection, path: str, cuda: bool | None) -> tuple[dict[str, Any], list[str]]:
    """The JSON's optimizer with its "auto" values filled from the (resolved) recipe, and what
    cannot run here. ``cuda`` False: this machine trains on CPU; None: not known yet."""
    if not isinstance(opt, dict) or not isinstance(opt.get("type", "AdamW"), str):
        return {}, [f"optimizer: {path} needs a \"type\" (SGD, Adam, AdamW, Adagrad...) in its optimizer block"]
    # No type: the recipe's own optimizer, AdamW, with the block's parameters.
    kind, params = opt.get("type", "AdamW"), dict(opt.get("params") or {})
    problems = []
    if kind.lower() in CUDA_ONLY_OPTIMIZERS and cuda is False:
        problems.append(f"optimizer.type: {kind!r} in {path} runs only on CUDA GPUs (a fused kernel); on CPU use "
                        "SGD, Adam, AdamW or Adagrad, or train where a GPU is (train.device=auto)")
    elif kind.lower() not in DEEPSPEED_OPTIMIZERS and not _torch_optimizer(kind):
        problems.append(f"optimizer.type: {kind!r} in {path} is neither a DeepSpeed optimizer nor a torch.optim "
                        "class; use SGD, Adam, AdamW, Adagrad (any machine) or Lamb (GPUs)")
    # "auto" takes the recipe's value, as HF's integration does.
    ours = {"lr": t.lr, "betas": [t.adam_beta1, t.adam_beta2], "eps": t.adam_eps, "weight_decay": t.weight_decay}
    for name, value in list(params.items()):
        if value == "auto" and name in ours:
            params[name] = ours[name]
        elif value == "auto":
            problems.append(f"optimizer.params.{name}: \"auto\" in {path}, but the recipe has no value for it; write one")
    params.setdefault("lr", t.lr)  # torch's optimizers default to another rate (SGD: 0.001)
    if kind.lower() in ADAMW_TYPES and "torch_adam" not in params:
        # Without offload, torch's Adam(W) (DeepSpeed's FusedAdam is a CUDA kernel that may not be built).
        params["torch_adam"] = t.effective_offload == "none"
    return {"type": kind, "params": params}, problems


def _torch_optimizer(name: str) -> bool:
    import torch

    return isinstance(getattr(torch.optim, name, None), type)


def _scheduler_block(sched: Any, path: str, lr: Any, warm: int | None,
                     total_steps: int | None) -> tuple[dict[str, Any], list[str]]:
    """The JSON's scheduler with its "auto" values filled (the step counts once the run knows them)."""
    if not isinstance(sched, dict) or not isinstance(sched.get("type"), str):
        return {}, [f"scheduler: {path} needs a \"type\" (WarmupLR, WarmupDecayLR, WarmupCosineLR...) in its scheduler block"]
    params = dict(sched.get("params") or {})
    fills = {"warmup_min_lr": 0, "warmup_max_lr": lr, "warmup_num_steps": warm, "total_num_steps": total_steps}
    for name, mine in fills.items():
        if params.get(name) == "auto" and mine is not None:
            params[name] = mine
    return {"type": sched["type"], "params": params}, []


def resolve_deepspeed_json(recipe: Recipe, world_size: int | None, cuda: bool | None = None) -> Resolved:
    """The recipe a run with ``train.deepspeed_config`` trains, decided before anything is
    submitted, with ``world_size`` processes (the plan's; None where only the nodes know it).
    ``validate``, the dry run and ``run`` all call this and the run directory gets its recipe:
    the JSON's values for the keys the recipe did not set, the config checked as the nodes will
    build it (every problem a DeepSpeedConfigError). ``cuda``: whether the run has GPUs (None:
    not known here, unless ``train.device`` is cpu, or the run is local and this machine says)."""
    t = recipe.train
    if t.strategy != "deepspeed" or not t.deepspeed_config:
        return Resolved(recipe, [])
    if t.device == "cpu":
        cuda = False
    elif cuda is None and recipe.launch.backend == "local":
        cuda = _cuda()  # a local run trains on this machine
    user = normalize_user_config(read_user_config(t.deepspeed_config))
    resolved, notes = adopt_json(recipe, user, world_size, cuda)
    # Precision auto is decided on the node; any other is compared here.
    mixed = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}.get(resolved.train.precision)
    _build(resolved, user, world_size, mixed, cuda=cuda)
    return Resolved(resolved, notes)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def merge_user_config(built: dict[str, Any], origin: dict[str, str], user: dict[str, Any], path: str) -> dict[str, Any]:
    """``user`` deep-merged over ``built``; DeepSpeedConfigError lists every contradicted key."""
    flat_built, flat_user = _flatten(built), _flatten(user)
    clashes = []
    for key, theirs in sorted(flat_user.items()):
        if key in origin and theirs != "auto" and not same_value(theirs, flat_built.get(key)):
            clashes.append(f"{key}: {theirs!r} in {path}, but {flat_built.get(key)!r} from {origin[key]}")
    if clashes:
        raise DeepSpeedConfigError(
            "train.deepspeed_config contradicts the recipe:\n  - " + "\n  - ".join(clashes)
            + "\nset these in the recipe (or remove them from the JSON, or write \"auto\")"
        )
    return _deep_merge(built, user)


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


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for k in parents:
        cfg = cfg[k]
    cfg[last] = value


# "auto" values known only once the run has its model and its number of steps.
FILLED_ON_THE_NODE = (*HIDDEN_SIZE_AUTO, "scheduler.params.warmup_num_steps", "scheduler.params.total_num_steps")


def deepspeed_config(recipe: Recipe, world_size: int | None, mixed_precision: str | None, *,
                     total_steps: int | None = None, hidden_size: int | None = None,
                     cuda: bool | None = None) -> dict[str, Any]:
    """The recipe's config, or with ``train.deepspeed_config`` the user's JSON: the recipe
    resolved against it (:func:`resolve_deepspeed_json`'s rules; on the nodes the run
    directory's recipe, resolved already, agrees with it key for key), its "auto" values filled.
    ``total_steps`` and ``hidden_size`` are given on the node, where every "auto" must be filled;
    ``cuda`` says whether the run has GPUs (None: not known here, unless ``train.device`` is cpu)."""
    if recipe.train.strategy != "deepspeed" or not recipe.train.deepspeed_config:
        return build_config(with_deepspeed_json(recipe).train, world_size, mixed_precision)[0]
    user = normalize_user_config(read_user_config(recipe.train.deepspeed_config))
    recipe, _ = adopt_json(recipe, user, world_size, False if recipe.train.device == "cpu" else cuda)
    return _build(recipe, user, world_size, mixed_precision, total_steps=total_steps, hidden_size=hidden_size,
                  cuda=cuda)


def _build(recipe: Recipe, user: dict[str, Any], world_size: int | None, mixed_precision: str | None, *,
           total_steps: int | None = None, hidden_size: int | None = None, cuda: bool | None = None) -> dict[str, Any]:
    """The config of a recipe resolved against ``user`` (its JSON): its stage, offload, optimizer
    and scheduler as written, "auto" filled from the recipe, what cannot run here refused."""
    t, path = recipe.train, recipe.train.deepspeed_config or ""
    if cuda is None and t.device == "cpu":
        cuda = False
    user = json.loads(json.dumps(user))  # popped from below
    cfg, origin = build_config(t, world_size, mixed_precision)
    # The JSON owns these (resolved into the recipe already); the keys the loop owns stay checked.
    origin = {k: v for k, v in origin.items() if not k.startswith(("optimizer.", "zero_optimization."))}
    final = total_steps is not None
    problems: list[str] = []
    if "optimizer" in user:
        cfg["optimizer"], found = _optimizer_block(user.pop("optimizer"), t, path, cuda)
        problems += found
    if "scheduler" in user:
        lr = cfg["optimizer"].get("params", {}).get("lr", t.lr)
        steps = total_steps if final else t.max_steps  # a run counted in epochs knows its steps on the node
        warm = max(1, warmup_steps(t, steps)) if steps else None  # DeepSpeed wants at least 1
        cfg["scheduler"], found = _scheduler_block(user.pop("scheduler"), path, lr, warm, steps)
        problems += found
    if problems:
        raise DeepSpeedConfigError("train.deepspeed_config cannot run here:\n  - " + "\n  - ".join(problems))
    cfg = merge_user_config(cfg, origin, user, path)
    flat = _flatten(cfg)
    if hidden_size:
        for key, size in HIDDEN_SIZE_AUTO.items():
            if flat.get(key) == "auto":
                _set(cfg, key, size(hidden_size))
    later = (*FILLED_ON_THE_NODE, *(("train_batch_size",) if world_size is None else ()))
    left = [k for k, v in _flatten(cfg).items() if v == "auto" and (final or k not in later)]
    if left:
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path}: nothing in the recipe or the model fills "
                                   f"\"auto\" for {', '.join(left)}; write values there")
    return cfg
