"""A run's checkpoint as the model of another run: ``run:<run>@step-N`` as an SFT base or as
an RL policy, reference, value or reward model.

A checkpoint holds weights, optimizer state and RNG states, not a directory ``from_pretrained``
reads; a sharded one (FSDP, ZeRO) must be gathered and an adapter-only one merged onto its base,
both through its run's recipe. So the first
run that names it writes it out once, as :func:`clustertune.use.export.export_model` would
(built as its run built it, its signature and every file's digest checked, an adapter merged
onto its base), into that run's ``checkpoint-models/step-N`` directory (``RunPaths.checkpoint_model``).
The new run's resolved recipe then names that directory: the nodes read a plain model, and
``clustertune runs rm`` of the older run knows it is still needed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.models.local import checkpoint_refs
from clustertune.models.run_models import resolve_run_model
from clustertune.runs.paths import checkpoint_ref
from clustertune.use.export import write_export
from clustertune.use.load import Target, find_target

log = logging.getLogger("clustertune")


def checkpoint_target(ref: str, key: str, runs_root: str | os.PathLike[str] | None = None) -> Target | None:
    """The checkpoint ``run:<run>@step-N`` names, checked as a model for another run (complete,
    signed, not TRL's); None for any other reference. Errors name ``key``."""
    found = resolve_run_model(ref, key, runs_root)
    if found is None or found.step is None:
        return None
    try:
        return find_target(checkpoint_ref(str(found.run.paths.root), found.step), runs_root)
    except UserError as exc:
        raise type(exc)(f"{key}: {exc}") from None


def checkpoint_as_model(ref: str, key: str, runs_root: str | os.PathLike[str] | None = None) -> Path | None:
    """The model directory of the checkpoint ``run:<run>@step-N`` names, written out the first
    time it is asked for (later runs reuse it); None for any other reference."""
    target = checkpoint_target(ref, key, runs_root)
    if target is None:
        return None
    assert target.run is not None and target.step is not None
    out = target.run.paths.checkpoint_model(target.step)
    if not (out / "config.json").is_file():  # written under a temporary name and renamed: complete when there
        log.info("%s: writing %s out as a model into %s (once; later runs reuse it)", key, target.label, out)
        write_export(target, out, merge=target.adapter)
    return out


def with_checkpoint_models(recipe: Any, runs_root: str | os.PathLike[str] | None = None) -> Any:
    """``recipe`` with every ``run:<run>@step-N`` it names as a model replaced by that
    checkpoint's model directory (:func:`checkpoint_as_model`)."""
    for key, ref in checkpoint_refs(recipe):
        path = str(checkpoint_as_model(ref, key, runs_root))
        if key == "model.name_or_path":
            recipe = recipe.model_copy(update={"model": recipe.model.model_copy(update={"name_or_path": path})})
        elif key.startswith("rl.rewards."):
            i = int(key.split(".")[2])
            rewards = list(recipe.rl.rewards)
            rewards[i] = rewards[i].model_copy(update={"model": path})
            recipe = recipe.model_copy(update={"rl": recipe.rl.model_copy(update={"rewards": rewards})})
        else:
            recipe = recipe.model_copy(update={"rl": recipe.rl.model_copy(update={key.split(".")[1]: path})})
    return recipe
