"""The DeepSpeed config a recipe implies, and a user's own JSON.

Pure data: nothing here imports DeepSpeed, so configs are built and checked (and tested)
on machines without it. Without a JSON the recipe says everything. With one
(``train.deepspeed_config``) the JSON is the source of truth for the ZeRO stage, offload,
optimizer and scheduler: the recipe may restate them, and a recipe key set to something else
is a contradiction naming both places; the JSON's ``"auto"`` values are filled from the recipe
as Hugging Face's integration fills them (optimizer and scheduler values, step counts, ZeRO
bucket sizes from the hidden size). The keys the recipe's loop owns (batch sizes, clipping,
precision) may be ``"auto"`` or repeated with the same value; a different value is reported
key by key with both values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.recipe.schema import Recipe, TrainSection, strategy_problems
from clustertune.train.schedule import warmup_steps


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


# Optimizer types DeepSpeed configs name that are AdamW (DeepSpeed's "Adam" is AdamW unless
# adam_w_mode is false).
ADAMW_TYPES = ("adamw", "adam")


# DeepSpeed's schedulers that are one of the recipe's (train.lr_scheduler); the others
# (OneCycle, LRRangeTest) have no recipe counterpart.
SCHEDULER_OF = {"WarmupLR": "constant", "WarmupDecayLR": "linear", "WarmupCosineLR": "cosine"}
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


def normalize_user_config(user: dict[str, Any]) -> dict[str, Any]:
    """Legacy spellings mapped onto what they mean (a copy): ``zero_optimization: false`` is
    stage 0 and ``true`` stage 1 to DeepSpeed; ``cpu_offload: true`` is the optimizer offload."""
    user = json.loads(json.dumps(user))
    zero = user.get("zero_optimization")
    if isinstance(zero, bool):
        user["zero_optimization"] = zero = {"stage": 1 if zero else 0}
    if isinstance(zero, dict) and "cpu_offload" in zero:
        if zero.pop("cpu_offload") is True:
            zero.setdefault("offload_optimizer", {"device": "cpu"})
    return user


def _json_stage(user: dict[str, Any]) -> Any:
    zero = user.get("zero_optimization")
    stage = zero.get("stage") if isinstance(zero, dict) else None
    return None if stage == "auto" else stage


def _json_offload(user: dict[str, Any]) -> str | None:
    """What the JSON offloads (``none``/``optimizer``/``params``), None where it does not say."""
    zero = user.get("zero_optimization")
    if not isinstance(zero, dict):
        return None
    said = {}
    for section in ("offload_optimizer", "offload_param"):
        block = zero.get(section)
        device = block.get("device") if isinstance(block, dict) else None
        if device not in (None, "auto"):
            said[section] = device != "none"
    if said.get("offload_param"):
        return "params"
    if said.get("offload_optimizer"):
        return "optimizer"
    return "none" if said else None


def _recipe_origin(t: TrainSection, key: str) -> str:
    """Where the recipe's ZeRO stage or offload comes from, for messages."""
    if getattr(t, key) is not None:
        return f"train.{key}"
    return f"train.deepspeed_preset={t.deepspeed_preset}"


def with_deepspeed_json(recipe: Recipe) -> Recipe:
    """The recipe with the ZeRO stage and offload of its ``train.deepspeed_config`` (the JSON is
    the source of truth; the recipe may restate them). A recipe that says otherwise, itself or
    through a preset, is refused naming both places."""
    t = recipe.train
    if t.strategy != "deepspeed" or not t.deepspeed_config:
        return recipe
    path = t.deepspeed_config
    user = normalize_user_config(read_user_config(path))
    clashes, update = [], {}
    stage = _json_stage(user)
    if stage is not None:
        if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
            clashes.append(f"zero_optimization.stage: {stage!r} in {path} is not a ZeRO stage; write 0, 1, 2 or 3")
        elif (t.zero_stage is not None or t.deepspeed_preset) and t.effective_zero_stage != stage:
            clashes.append(f"zero_optimization.stage: {stage} in {path}, but {t.effective_zero_stage} from "
                           f"{_recipe_origin(t, 'zero_stage')}")
        else:
            update["zero_stage"] = stage
    offload = _json_offload(user)
    if offload is not None:
        if (t.offload is not None or t.deepspeed_preset) and t.effective_offload != offload:
            clashes.append(f"zero_optimization.offload_*: {offload!r} offloaded in {path}, but {t.effective_offload!r} "
                           f"from {_recipe_origin(t, 'offload')}")
        else:
            update["offload"] = offload
    if clashes:
        raise DeepSpeedConfigError("train.deepspeed_config contradicts the recipe:\n  - " + "\n  - ".join(clashes)
                                   + "\nchange one of the two places (or remove the key from the recipe: the JSON decides)")
    resolved = t.model_copy(update=update)
    wrong = [f"{key}: {msg}" for key, msg in strategy_problems(resolved) if key in ("train.offload", "train.zero_stage")]
    if wrong:
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path} asks for a combination DeepSpeed cannot run: "
                                   + "; ".join(wrong))
    return recipe.model_copy(update={"train": resolved})


def _optimizer_block(opt: Any, t: TrainSection, path: str, cuda: bool | None,
                     explicit: set[str]) -> tuple[dict[str, Any], list[str]]:
    """The JSON's optimizer with its "auto" values filled from the recipe; contradictions with
    the ``explicit`` keys (those the recipe sets itself). ``cuda`` False: this machine trains on
    CPU; None: not known yet."""
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
    # (value, the recipe keys behind it): "auto" takes the recipe's value, as HF's integration does.
    ours = {"lr": (t.lr, ("lr",)), "betas": ([t.adam_beta1, t.adam_beta2], ("adam_beta1", "adam_beta2")),
            "eps": (t.adam_eps, ("adam_eps",)), "weight_decay": (t.weight_decay, ("weight_decay",))}
    for name, value in list(params.items()):
        if name in ours:
            mine, keys = ours[name]
            if value == "auto":
                params[name] = mine
            elif explicit.intersection(keys) and not _same(value, mine):
                problems.append(f"optimizer.params.{name}: {value!r} in {path}, but {mine!r} from "
                                + "/".join(f"train.{k}" for k in keys))
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


def _scheduler_block(sched: Any, t: TrainSection, path: str, lr: Any, total_steps: int | None,
                     explicit: set[str]) -> tuple[dict[str, Any], list[str]]:
    """The JSON's scheduler with its "auto" values filled (the step counts once the run knows
    them); contradictions with the recipe's own schedule keys."""
    if not isinstance(sched, dict) or not isinstance(sched.get("type"), str):
        return {}, [f"scheduler: {path} needs a \"type\" (WarmupLR, WarmupDecayLR, WarmupCosineLR...) in its scheduler block"]
    kind, params = sched["type"], dict(sched.get("params") or {})
    problems = []
    if "lr_scheduler" in explicit and SCHEDULER_OF.get(kind) != t.lr_scheduler:
        problems.append(f"scheduler.type: {kind!r} in {path} ({SCHEDULER_OF.get(kind, 'no recipe schedule')}), "
                        f"but {t.lr_scheduler!r} from train.lr_scheduler")
    warm = max(1, warmup_steps(t, total_steps)) if total_steps else None  # DeepSpeed wants at least 1
    fills = {"warmup_min_lr": (0, ()), "warmup_max_lr": (lr, ("lr",)),
             "warmup_num_steps": (warm, ("warmup_steps", "warmup_ratio")),
             "total_num_steps": (total_steps, ("max_steps", "epochs"))}
    for name, (mine, keys) in fills.items():
        value = params.get(name)
        if value == "auto":
            if mine is not None:
                params[name] = mine
        elif value is not None and mine is not None and explicit.intersection(keys) and not _same(value, mine):
            problems.append(f"scheduler.params.{name}: {value!r} in {path}, but {mine!r} from "
                            + "/".join(f"train.{k}" for k in keys))
    return {"type": kind, "params": params}, problems


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
    """The recipe's config, or with ``train.deepspeed_config`` the user's JSON: its stage,
    offload, optimizer and scheduler as written, its "auto" values filled from the recipe,
    the keys the recipe owns checked against it. ``total_steps`` and ``hidden_size`` are given
    on the node, where every "auto" must be filled; ``cuda`` says whether the run has GPUs
    (None: not known here, unless ``train.device`` is cpu)."""
    recipe = with_deepspeed_json(recipe)  # stage and offload from the JSON
    t = recipe.train
    cfg, origin = build_config(t, world_size, mixed_precision)
    if not t.deepspeed_config:
        return cfg
    path = t.deepspeed_config
    if cuda is None and t.device == "cpu":
        cuda = False
    user = normalize_user_config(read_user_config(path))
    # The JSON owns these: checked against the recipe's explicit keys above and below, not its defaults.
    origin = {k: v for k, v in origin.items() if not k.startswith(("optimizer.", "zero_optimization."))}
    # The keys the recipe sets itself, which may restate the JSON but not contradict it. Checked
    # before the run starts: the run directory's recipe is the resolved one, every key written.
    final = total_steps is not None
    explicit = set() if final else set(t.model_fields_set)
    problems: list[str] = []
    if "optimizer" in user:
        cfg["optimizer"], found = _optimizer_block(user.pop("optimizer"), t, path, cuda, explicit)
        problems += found
    if "scheduler" in user:
        lr = cfg["optimizer"].get("params", {}).get("lr", t.lr)
        steps = total_steps if final else t.max_steps  # a run counted in epochs knows its steps on the node
        cfg["scheduler"], found = _scheduler_block(user.pop("scheduler"), t, path, lr, steps, explicit)
        problems += found
    if problems:
        raise DeepSpeedConfigError("train.deepspeed_config contradicts the recipe or cannot run here:\n  - "
                                   + "\n  - ".join(problems))
    cfg = merge_user_config(cfg, origin, user, path)
    flat = _flatten(cfg)
    if hidden_size:
        for key, size in HIDDEN_SIZE_AUTO.items():
            if flat.get(key) == "auto":
                _set(cfg, key, size(hidden_size))
    left = [k for k, v in _flatten(cfg).items() if v == "auto" and (final or k not in FILLED_ON_THE_NODE)]
    if left:
        raise DeepSpeedConfigError(f"train.deepspeed_config: {path}: nothing in the recipe or the model fills "
                                   f"\"auto\" for {', '.join(left)}; write values there")
    return cfg


def check_deepspeed_json(recipe: Recipe) -> None:
    """Before anything is submitted (validate, dry run, launch): the user's JSON parses and
    agrees with the recipe. Precision ``auto`` is decided on the node, so not compared here."""
    t = recipe.train
    if t.strategy == "deepspeed" and t.deepspeed_config:
        # A local run trains on this machine: whether it has a GPU is known here.
        cuda = _cuda() if recipe.launch.backend == "local" else None
        deepspeed_config(recipe, None, {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}.get(t.precision), cuda=cuda)
