"""The one preflight: what ``validate``, ``run --dry-run``, ``prepare``, ``estimate-memory`` and
the start of ``run`` check, with no GPU, no network and no data read.

Every problem is gathered before any is reported (one :class:`RecipeError`, each problem naming
the file and line or the override, the key and the fix): this machine's paths, ``run:<run>``
bases and the models of the ``rl`` section read from the runs directory, the model's config
with its ``config_overrides`` applied, that config built on the meta device (so the model class
itself checks names, sizes and head divisibility; nothing is allocated), the sequence length
against the model's positions, the adapter, the task's own checks (a chat template compiles),
user code a recipe names (metrics, reward functions), trackers and a DeepSpeed JSON (the recipe
returned is resolved against it with the plan's number of processes: what the run trains). What it
cannot know offline, a hub model with nothing cached here, it lists as not checked.

torch and transformers are imported only when there is a config to build.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import LaunchError, RecipeError, UserError
from clustertune.extras import install_hint
from clustertune.launch.decision import planned_world_size
from clustertune.models.adapters import check_adapter
from clustertune.models.build import check_sequence_fits, resolve_config
from clustertune.models.meta_check import MODEL_CHECKS, ModelChecks, meta_build_error
from clustertune.models.local import checkpoint_refs, config_dir, locate_model
from clustertune.recipe.checked import Checked
from clustertune.data.cache import cache_root
from clustertune.recipe.load import key_lines, resolve_recipe_path, shipped_recipes
from clustertune.recipe.local_checks import local_problems, located
from clustertune.recipe.rl_schema import model_refs
from clustertune.recipe.run_refs import is_run_ref, names_checkpoint, run_part
from clustertune.recipe.schema import Recipe
from clustertune.runs.store import runs_root
from clustertune.tasks import task_of
from clustertune.tasks.cls_metrics import metric_functions
from clustertune.recipe.ds_config import resolve_deepspeed_json
from clustertune.recipe.trackers import check_trackers
from clustertune.tasks.reward_style import load_reward
from clustertune.use.bases import checkpoint_target

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Where:
    """Where a recipe came from, so that problems name its file and lines or the override."""

    file: str | None = None
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()

    @classmethod
    def of(cls, source: Any, overrides: list[str] | None = None) -> Where:
        """The file of a YAML path or shipped name (a Recipe or dict has none)."""
        if isinstance(source, (str, os.PathLike)):
            try:
                path = resolve_recipe_path(source)
                return cls(str(path), key_lines(path.read_text(encoding="utf-8")), tuple(overrides or ()))
            except (UserError, OSError, ValueError):
                pass
        return cls(None, {}, tuple(overrides or ()))


def _message(exc: UserError, key: str) -> tuple[str, str]:
    """A raised error as (key, message): its own ``key: `` prefix when it starts with one."""
    text = str(exc)
    head, sep, rest = text.partition(": ")
    if sep and head and " " not in head and (head.startswith(("model", "data", "train", "launch", "tracking", "rl"))):
        return head, rest
    return key, text


class _Gather:
    """The problems and notes of one preflight, as each check adds them."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []
        self.not_checked: list[str] = []
        self.checkpoints: dict[str, Any] = {}  # key -> the checkpoint ``run:<run>@step-N`` names there

    def add(self, pairs: list[tuple[str, str]]) -> None:
        self.found.extend(p for p in pairs if p not in self.found)

    def keys(self) -> set[str]:
        return {k for k, _ in self.found}

    def run(self, key: str, check: Any, *args: Any) -> Any:
        """``check(*args)``; a UserError it raises becomes a problem at its key (else ``key``)."""
        try:
            return check(*args)
        except UserError as exc:
            self.add([_message(exc, key)])
            return None


def check(recipe: Recipe, where: Where | None = None, *, runs_root_dir: PathLike | None = None,
          need_base: bool = False) -> Checked:
    """Every problem ``run`` would refuse ``recipe`` for that needs no GPU, network or data, raised
    together as one RecipeError. ``need_base``: a ``run:<name>`` base must exist now (prepare and
    estimate-memory need it; ``run`` trains a missing shipped recipe's run first)."""
    where = where or Where()
    root = str(runs_root(runs_root_dir or recipe.tracking.runs_root))
    # Relative paths are looked for beside the recipe file, then here; the checks below, and the
    # run, see them absolute.
    # (A shipped recipe's folder is clustertune's own: paths given to one start here.)
    base = Path(where.file).parent if where.file and where.file not in map(str, shipped_recipes().values()) else None
    recipe, found = local_problems(recipe, base)
    g = _Gather()
    g.add(found)
    task = task_of(recipe.task)
    trained_first = None if need_base else _trained_first(recipe, root)
    if trained_first is not None:  # not there yet, and `run` makes it: not a problem, only not checked
        g.not_checked.append(trained_first)
    g.add(_run_base_refused(recipe))
    g.add([p for p in g.run(f"task {recipe.task}", task.preflight, recipe, root) or []
           if trained_first is None or p[0] != task.base_key])
    _checkpoint_checks(recipe, root, g)
    if recipe.rl is None:
        _model_checks(recipe, root, need_base, g)
    else:  # the task's checks found the run: and local models; hub names are read when the run loads them

        g.not_checked += [f"{key}: {ref!r} is a hub model with nothing cached here; it is read when the run "
                          "loads it" for key, ref in model_refs(recipe.rl)
                          if not is_run_ref(ref) and not Path(ref).expanduser().exists() and _cached(ref) is None]
    _user_code_checks(recipe, g)
    recipe = _deepspeed_json(recipe, g)
    if g.found:
        raise RecipeError(located(g.found, where.file, where.lines, list(where.overrides)))
    return Checked(recipe, g.not_checked)


def _deepspeed_json(recipe: Recipe, g: _Gather) -> Recipe:
    """The recipe resolved against its DeepSpeed JSON with the plan's number of processes: what
    the run trains (the JSON's values for the keys the recipe leaves unset), or its problems."""

    if not recipe.train.deepspeed_config or recipe.train.strategy != "deepspeed":
        return recipe
    resolved = g.run("train.deepspeed_config", resolve_deepspeed_json, recipe, planned_world_size(recipe))
    if resolved is None:
        return recipe
    g.not_checked += resolved.not_checked
    return resolved.recipe


def _model_checks(recipe: Recipe, root: str, need_base: bool, g: _Gather) -> None:
    """The model's config (from its run, directory, cache or type) with the overrides applied,
    built on the meta device, against the recipe's sequence length and adapter."""

    m = recipe.model
    ref = m.name_or_path
    if m.config is None and ref:
        key = "model.name_or_path"
        if key in g.checkpoints:
            src = _checkpoint_config(g.checkpoints[key], key, g)
            if src is None:
                return
        elif is_run_ref(ref) and (names_checkpoint(ref) or key in g.keys()):
            return  # its checkpoint is not there, not one a model can be built from, or refused: said above
        elif is_run_ref(ref):
            name = run_part(ref)
            try:
                model_dir = locate_model(ref, key, root)
            except UserError as exc:
                if not need_base and _trained_first(recipe, root) is not None:
                    return  # not checked, as check() says
                k, msg = _message(exc, key)
                if name in shipped_recipes():
                    msg += f"; train it first with `clustertune run {name}`"
                g.add([(k, msg)])
                return
            src = config_dir(Path(model_dir))
        elif key in g.keys():
            return  # the path check named what is wrong with the directory
        else:
            src = g.run(key, locate_model, ref, key, root)
            if src is None:
                return
        if isinstance(src, str):  # a hub name: read from the cache, never from the network
            cached = _cached(src, m.revision)
            if cached is None:
                g.not_checked.append(f"{key}: {src!r} is a hub model with nothing cached here, so its config, "
                                     "config_overrides and positions are checked once `clustertune run` downloads it")
                return
            src = cached
        if _remote_code_refused(Path(src), m.trust_remote_code, g):
            return
        recipe = recipe.model_copy(update={"model": m.model_copy(update={"name_or_path": str(src), "revision": None})})
    _build_checks(recipe, g)


def _trained_first(recipe: Recipe, root: str) -> str | None:
    """What is not checked because ``run`` trains it first: a ``run:<name>`` base (the task's
    ``base_key``) of a task that starts from another run's model, where no ``name`` run has a
    final model yet and ``name`` is a shipped recipe. None where there is no such base."""
    task = task_of(recipe.task)
    ref = (task.base_ref(recipe) or "") if task.base_model_from_run else ""
    name = run_part(ref)
    if not is_run_ref(ref) or names_checkpoint(ref) or name not in shipped_recipes():
        return None
    try:
        locate_model(ref, task.base_key, root)
    except UserError:
        return (f"{task.base_key}: {ref}: no {name} run with a final model under {root} yet; "
                f"`clustertune run` trains it first (`clustertune run {name}`)")
    return None


def _run_base_refused(recipe: Recipe) -> list[tuple[str, str]]:
    """A ``run:`` name as the model of a task that cannot start from another run's model."""
    task = task_of(recipe.task)
    ref = task.base_ref(recipe) or ""
    if task.base_model_from_run or not is_run_ref(ref):
        return []
    return [(task.base_key, f"{ref}: task {task.name} cannot start from another run's model; name a hub model or a "
                            "save_pretrained directory (a finished run's final model is its model/ directory: "
                            "`clustertune runs show RUN` prints it)")]


def _remote_code_refused(config_dir: Path, trusted: bool, g: _Gather) -> bool:
    """A model whose config.json names its own classes (``auto_map``) for a model type this
    transformers does not have runs code that came with it: refused unless the recipe trusts it."""
    # Deferred: transformers' registry of model types, for recipes with a config to read.
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        data = json.loads((config_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # the config checks below name what is wrong with it
    if trusted or not isinstance(data, dict) or not data.get("auto_map") or data.get("model_type") in CONFIG_MAPPING:
        return False
    classes = ", ".join(sorted({str(v) for v in data["auto_map"].values() if isinstance(v, str)})[:3])
    g.add([("model.trust_remote_code", f"{config_dir} is a {data.get('model_type')!r} model whose code ships with "
            f"it ({classes}); set model.trust_remote_code: true if you trust that code (it runs with your rights), "
            "or choose a model transformers supports itself")])
    return True


def _checkpoint_checks(recipe: Recipe, root: str, g: _Gather) -> None:
    """Every ``run:<run>@step-N`` named as a model: the run and its checkpoint of step N are
    there, signed, every file's digest right, and it is one a model can be built from (not
    TRL's, not shards). Found ones are kept for the model checks."""

    for key, ref in checkpoint_refs(recipe):
        if key in g.keys():
            continue  # the task's checks already found it missing
        target = g.run(key, checkpoint_target, ref, key, root)
        if target is not None:
            g.checkpoints[key] = target


def _checkpoint_config(target: Any, key: str, g: _Gather) -> Path | None:
    """Where the config of a checkpoint's model is read from without writing anything: the
    checkpoint written out as a model (once a run named it), else its run's final model (the same
    architecture), else nothing (a note: checked when a run writes it out)."""
    paths = target.run.paths
    made = paths.checkpoint_model(target.step)
    if (made / "config.json").is_file():
        return made
    if paths.has_final_model:
        src = config_dir(paths.model)
        return src if isinstance(src, Path) else None
    g.not_checked.append(f"{key}: {target.label} is checked (signed, complete); its model's config is checked "
                         "when `clustertune run` writes the checkpoint out as a model")
    return None


def _cached(name: str, revision: str | None = None) -> Path | None:
    """The directory of the hub model ``name``'s config.json (at ``revision``) in the local cache,
    if it is there."""
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(name, "config.json", revision=revision)
    except Exception:  # a name the hub would refuse (HFValidationError): the loaders say so
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def _build_checks(recipe: Recipe, g: _Gather) -> None:
    """The config resolved, against the sequence length, built and wrapped: checks that import
    transformers and torch, so once all passed for a model they are remembered
    (models/meta_check.py)."""
    remembered = ModelChecks(recipe, cache_root(recipe) / MODEL_CHECKS)
    if remembered.passed:
        return
    found, whole = len(g.found), recipe.sequence_key not in g.keys()
    config = g.run("model", resolve_config, recipe, None)
    if config is None:
        return
    if whole:
        g.run(recipe.sequence_key, check_sequence_fits, recipe, config)
    if _meta_build(recipe, config, g):
        g.run("model.adapter", check_adapter, recipe, config)
    if whole and len(g.found) == found:
        remembered.remember()


def _meta_build(recipe: Recipe, config: Any, g: _Gather) -> bool:
    """The model built from ``config`` on the meta device: its class checks what its config
    holds (a width that its heads do not divide, a zero size) as it will when the run builds it.
    A config that built before is remembered in the data cache (models/meta_check.py)."""
    exc = meta_build_error(config, recipe.traits.head, recipe.model.trust_remote_code,
                           cache_root(recipe) / MODEL_CHECKS)
    if exc is None:
        return True
    key = "model.config_overrides" if recipe.model.config_overrides else (
        "model.config" if recipe.model.config else "model.name_or_path")
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    g.add([(key, f"the {config.model_type} model cannot be built from this config ({type(exc).__name__}: "
                 f"{first}); change the sizes in {key}")])
    return False


def _user_code_checks(recipe: Recipe, g: _Gather) -> None:
    """What the recipe names that this machine must import or read: metric and reward functions,
    trackers; and a recipe always runs under torchrun."""

    if recipe.launch.runner != "torchrun":
        g.run("launch.runner", _raise, LaunchError(
            f"launch.runner: {recipe.launch.runner} applies to your own command (`clustertune launch ... -- COMMAND`); "
            "a recipe always runs under torchrun"))
    if recipe.launch.stage:
        g.run("launch.stage", _raise, LaunchError(
            "launch.stage: copies paths for your own command (`clustertune launch ... -- COMMAND`); "
            "a recipe's data is staged with data.stage_to"))
    if recipe.launch.prepare is not None:
        g.run("launch.prepare", _raise, LaunchError(
            "launch.prepare: runs a step before your own command (`clustertune launch ... -- COMMAND`); "
            "a recipe's data is prepared by clustertune itself (launch.prepare_data says where)"))
    g.run("tracking.trackers", check_trackers, list(recipe.tracking.trackers))
    if recipe.train.optimizer.endswith("_8bit") and importlib.util.find_spec("bitsandbytes") is None:
        g.add([("train.optimizer", f"{recipe.train.optimizer} needs bitsandbytes, which is not installed here: "
                                   f"{install_hint('qlora')}, or use adamw")])
    if recipe.train.metrics:

        g.run("train.metrics", metric_functions, recipe.train.metrics, recipe.model.num_labels or 2)
    for i, r in enumerate(recipe.rl.rewards if recipe.rl is not None else []):
        if r.function and ":" in r.function:
            key = f"rl.rewards.{i}.function"
            g.run(key, load_reward, r.function, r.kwargs, key)  # imports, and its signature fits TRL or TRLX


def _raise(exc: UserError) -> None:
    raise exc
