"""A user's DeepSpeed JSON (``train.deepspeed_config``): read, its legacy spellings, and the
recipe it implies.

The JSON is the source of truth, and :func:`adopt_json` is the one place that says what that
means for the recipe: a recipe key the user did not set takes the JSON's value (ZeRO stage,
offload, optimizer values, schedule, batch sizes, clipping, precision); a key set explicitly (in
the YAML or an override: the train section's ``model_fields_set``) may restate the JSON, and a
different value is an error naming both places and the fix. ``train_batch_size`` is checked
against the plan's number of processes, and the micro batch or the accumulation that neither
side sets is derived from it. :func:`clustertune.recipe.ds_config.resolve_deepspeed_json` calls
it before anything is submitted (validate, the dry run, run), and the run directory's recipe is
the one it returns; on the nodes it finds nothing left to adopt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clustertune.errors import UserError
from clustertune.recipe.schema import Recipe, TrainSection, strategy_problems, warmup_steps


class DeepSpeedConfigError(UserError):
    """A DeepSpeed JSON that is unreadable or contradicts the recipe."""


# DeepSpeed's schedulers that are one of the recipe's (train.lr_scheduler); the others
# (OneCycle, LRRangeTest) have no recipe counterpart.
SCHEDULER_OF = {"WarmupLR": "constant", "WarmupDecayLR": "linear", "WarmupCosineLR": "cosine"}


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


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    return bool(a == b)


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


# -- the recipe a JSON implies ------------------------------------------------------------------

# The JSON's numbers that are recipe keys too: (dotted JSON key, train key). Set in the JSON and
# not in the recipe, the recipe takes them; set in both, they must agree.
JSON_NUMBERS = (
    ("optimizer.params.lr", "lr"),
    ("optimizer.params.eps", "adam_eps"),
    ("optimizer.params.weight_decay", "weight_decay"),
    ("train_micro_batch_size_per_gpu", "batch_size"),
    ("gradient_accumulation_steps", "gradient_accumulation_steps"),
)
PRECISIONS = ("bf16", "fp16")


@dataclass(frozen=True)
class Resolved:
    """A recipe resolved against its DeepSpeed JSON, and what could be checked only on the nodes."""

    recipe: Recipe
    not_checked: list[str]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _at(user: dict[str, Any], dotted: str) -> Any:
    node: Any = user
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


class _Adoption:
    """What the JSON gives the recipe (``take``), and where it contradicts a key set explicitly."""

    def __init__(self, t: TrainSection, path: str):
        self.t, self.path, self.explicit = t, path, set(t.model_fields_set)
        self.update: dict[str, Any] = {}
        self.source: dict[str, str] = {}  # train key -> the JSON key it was taken from
        self.clashes: list[str] = []

    def take(self, json_key: str, value: Any, keys: tuple[str, ...], values: tuple[Any, ...],
             mine: Any = None) -> None:
        """The JSON's ``value`` at ``json_key`` is ``values`` of train ``keys``; ``mine``: the recipe's
        side of the comparison where it is not simply the keys' values."""
        mine = mine if mine is not None else (getattr(self.t, keys[0]) if len(keys) == 1 else
                                              [getattr(self.t, k) for k in keys])
        if self.explicit.intersection(keys):
            if not same_value(value, mine):
                self.clash(json_key, value, mine, "/".join(f"train.{k}" for k in keys))
            return
        for k, v in zip(keys, values):
            if k not in self.update:
                self.update[k], self.source[k] = v, json_key

    def clash(self, json_key: str, value: Any, mine: Any, where: str) -> None:
        self.clashes.append(f"{json_key}: {value!r} in {self.path}, but {mine!r} from {where}")

    def now(self, key: str) -> Any:
        return self.update.get(key, getattr(self.t, key))

    def fixed(self, key: str) -> bool:
        """Whether the recipe set ``key`` itself or the JSON gives it."""
        return key in self.explicit or key in self.update

    def named(self, key: str) -> str:
        """``train.key value``, and the JSON's key where the value is the JSON's, for messages."""
        return f"train.{key} {self.now(key)}" + (f" (the JSON's {self.source[key]})" if key in self.source else "")


def _adopt_values(a: _Adoption, user: dict[str, Any]) -> None:
    t = a.t
    for json_key, key in JSON_NUMBERS:
        value = _at(user, json_key)
        if _number(value):
            a.take(json_key, value, (key,), (value,))
    betas = _at(user, "optimizer.params.betas")
    if isinstance(betas, (list, tuple)) and len(betas) == 2 and all(map(_number, betas)):
        a.take("optimizer.params.betas", list(betas), ("adam_beta1", "adam_beta2"), tuple(betas))
    clip = user.get("gradient_clipping")
    if _number(clip):  # DeepSpeed's 0 is no clipping, the recipe's null
        a.take("gradient_clipping", clip, ("max_grad_norm",), (clip or None,), mine=t.max_grad_norm or 0.0)
    sched = user.get("scheduler")
    if isinstance(sched, dict) and isinstance(sched.get("type"), str):
        kind, params = sched["type"], sched.get("params") or {}
        # OneCycle and LRRangeTest have no recipe counterpart: train.lr_scheduler does not apply.
        schedule = SCHEDULER_OF.get(kind)
        if schedule is not None and "lr_scheduler" in a.explicit and schedule != t.lr_scheduler:
            a.clashes.append(f"scheduler.type: {kind!r} in {a.path} ({schedule}), but {t.lr_scheduler!r} from "
                             "train.lr_scheduler")
        elif schedule is not None and "lr_scheduler" not in a.explicit:
            a.take("scheduler.type", kind, ("lr_scheduler",), (schedule,))
        peak = params.get("warmup_max_lr")
        if _number(peak) and not _number(_at(user, "optimizer.params.lr")):
            a.take("scheduler.params.warmup_max_lr", peak, ("lr",), (peak,))  # the rate warmed up to is the peak
        warm = params.get("warmup_num_steps")
        if _number(warm) and (warm < 1 or warm != int(warm)):
            a.clashes.append(f"scheduler.params.warmup_num_steps: {warm!r} in {a.path}: DeepSpeed needs a whole "
                             "number of steps, 1 or more; write one, or \"auto\"")
        elif _number(warm):
            if a.explicit.intersection(("warmup_steps", "warmup_ratio")):
                mine = warmup_steps(t, t.max_steps or 0)
                if (t.warmup_steps or t.max_steps) and not same_value(warm, max(1, mine)):
                    a.clash("scheduler.params.warmup_num_steps", warm, mine, "train.warmup_steps" if t.warmup_steps
                            else "train.warmup_ratio x train.max_steps")
            else:
                a.update["warmup_steps"], a.source["warmup_steps"] = int(warm), "scheduler.params.warmup_num_steps"
        total = params.get("total_num_steps")
        # The run's length stays the recipe's: a decay over another number of steps than the run
        # takes is refused where the recipe says how long the run is.
        if _number(total) and t.max_steps is not None and "max_steps" in a.explicit \
                and not same_value(total, t.max_steps):
            a.clash("scheduler.params.total_num_steps", total, t.max_steps, "train.max_steps")


def _adopt_precision(a: _Adoption, user: dict[str, Any], cuda: bool | None) -> None:
    """``bf16``/``fp16`` enabled in the JSON: the precision of a recipe that leaves it ``auto``."""
    said = {p: _at(user, f"{p}.enabled") for p in PRECISIONS}
    on = [p for p in PRECISIONS if said[p] is True]
    if len(on) == 2:
        a.clashes.append(f"bf16.enabled and fp16.enabled: both true in {a.path}; DeepSpeed trains in one of them: "
                         "set the other to false")
        return
    p = a.t.precision
    if p == "auto":
        if on:
            a.update["precision"], a.source["precision"] = on[0], f"{on[0]}.enabled"
        elif any(v is False for v in said.values()) and not any(v == "auto" for v in said.values()):
            a.update["precision"], a.source["precision"] = "fp32", "bf16.enabled/fp16.enabled"
    else:
        for name, value in said.items():
            if isinstance(value, bool) and value != (p == name):
                a.clashes.append(f"{name}.enabled: {str(value).lower()} in {a.path}, but train.precision is {p!r}; "
                                 f"set train.precision to {name if value else 'another precision'} (or auto: the "
                                 "JSON decides), or write \"auto\" in the JSON")
    if a.now("precision") == "fp16" and "precision" in a.update and cuda is False:
        a.clashes.append(f"fp16.enabled: true in {a.path}, but this run trains on CPU, where fp16 does not train; "
                         "set it to false or \"auto\" (bf16 runs on CPU), or train where a GPU is")


def _adopt_batch(a: _Adoption, user: dict[str, Any], world_size: int | None, notes: list[str]) -> None:
    """``train_batch_size`` is micro batch x accumulation x processes to DeepSpeed: with the
    plan's processes, the one of the two that neither the recipe nor the JSON sets is derived
    (the accumulation stays 1 where neither sets either, as DeepSpeed reads it); else they must agree."""
    total = user.get("train_batch_size")
    if not _number(total):
        return
    if world_size is None:
        notes.append(f"train.deepspeed_config: train_batch_size {total} in {a.path} is checked against the number "
                     "of processes on the nodes (one per GPU there); set launch.procs_per_node to check it now")
        return
    micro, accum = a.now("batch_size"), a.now("gradient_accumulation_steps")
    if micro * accum * world_size == total:
        return
    procs = f"{world_size} process{'es' if world_size > 1 else ''}"
    shape = "micro batch x accumulation x processes"
    fix = ("write \"auto\" there (the recipe's batch decides), or set train.batch_size and "
           "train.gradient_accumulation_steps to fit it (or leave them out: the JSON decides), or change "
           "launch.procs_per_node")
    derive = "gradient_accumulation_steps" if a.fixed("batch_size") and not a.fixed("gradient_accumulation_steps") \
        else None if a.fixed("batch_size") else "batch_size"
    if derive is None:
        a.clashes.append(f"train_batch_size: {total} in {a.path}, but {a.named('batch_size')} x "
                         f"{a.named('gradient_accumulation_steps')} x {procs} = {micro * accum * world_size}; "
                         f"DeepSpeed needs it to be {shape}: {fix}")
        return
    kept = "gradient_accumulation_steps" if derive == "batch_size" else "batch_size"
    other = accum if derive == "batch_size" else micro
    value, left = divmod(int(total), other * world_size)
    if left or value < 1 or total != int(total):
        a.clashes.append(f"train_batch_size: {total} in {a.path} is not a multiple of {a.named(kept)} x {procs} = "
                         f"{other * world_size}; DeepSpeed needs it to be {shape}: {fix}")
        return
    a.update[derive], a.source[derive] = value, "train_batch_size"


def adopt_json(recipe: Recipe, user: dict[str, Any], world_size: int | None,
               cuda: bool | None) -> tuple[Recipe, list[str]]:
    """The one resolution of a recipe against its JSON ``user`` (read and normalized), with
    ``world_size`` processes (None: only the nodes know; said in the notes) and ``cuda`` (False:
    the run trains on CPU): the recipe with the JSON's values for the keys it does not set, or a
    DeepSpeedConfigError naming every contradiction. A resolved recipe comes back unchanged."""
    recipe = with_deepspeed_json(recipe)  # the ZeRO stage and offload, contradictions named there
    t, path = recipe.train, recipe.train.deepspeed_config or ""
    a, notes = _Adoption(t, path), []
    _adopt_values(a, user)
    _adopt_precision(a, user, cuda)
    _adopt_batch(a, user, world_size, notes)
    if a.clashes:
        raise DeepSpeedConfigError("train.deepspeed_config contradicts the recipe or cannot run:\n  - "
                                   + "\n  - ".join(a.clashes) + "\nwhere a recipe key and the JSON disagree, change "
                                   "one of the two places, or remove the key from the recipe (the JSON decides)")
    if not a.update:
        return recipe, notes
    try:  # made again, so the JSON's values meet the recipe's own limits; they count as set from now on
        resolved = TrainSection.model_validate({**t.model_dump(exclude_unset=True), **a.update})
    except ValidationError as exc:
        raise DeepSpeedConfigError("train.deepspeed_config: " + "; ".join(
            f"{a.source.get(str(e['loc'][0]), e['loc'][0])}: {e.get('input')!r} in {path}: {e['msg']}"
            for e in exc.errors())) from None
    return recipe.model_copy(update={"train": resolved}), notes
