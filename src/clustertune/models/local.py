"""Models named by a local path or a run: such a name is never taken for a hub name, one that
pointed into a run that was removed says so, ``run:<run>`` finds that run's final model and
``run:<run>@step-N`` its checkpoint of step N."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustertune.errors import ModelError
from clustertune.models.run_models import resolve_run_model
from clustertune.recipe.rl_schema import model_refs
from clustertune.recipe.run_refs import names_checkpoint
from clustertune.runs.dependents import removed_run_of


def is_pathish(s: str) -> bool:
    """Written as a path (absolute, relative with ./ or ../, home-relative, or a .json file)."""
    return s.startswith(("/", "./", "../", "~")) or s.endswith(".json")


def require_local(name: str, key: str) -> None:
    """A model named by a path must be there; one that pointed into a run that was removed
    (``clustertune runs rm``) says so, instead of being taken for a hub name."""
    if not is_pathish(name) or Path(name).expanduser().exists():
        return
    gone = removed_run_of(name)
    if gone is not None:
        raise ModelError(f"{key}: {name} does not exist: its base run {gone} was removed (`clustertune runs rm`); "
                         f"train it again (a run of the same recipe) and point {key} at its model, or name another model")
    raise ModelError(f"{key}: directory {name!r} does not exist")


def checkpoint_refs(recipe: Any) -> list[tuple[str, str]]:
    """(key, reference) for every ``run:<run>@step-N`` a recipe names as a model: its base, its
    RL section's policy, reference, value and reward models."""
    refs = [("model.name_or_path", recipe.model.name_or_path or "")]
    refs += model_refs(recipe.rl) if recipe.rl is not None else []
    return [(k, v) for k, v in refs if names_checkpoint(v)]


def locate_model(ref: str, key: str, runs_root_dir: str | None = None) -> Path | str:
    """Where the model ``ref`` names is, as it is written in a recipe, without loading or
    writing anything: for ``run:<run>`` or ``run:<run>@step-N`` where that run's model is now
    (:func:`~clustertune.models.run_models.resolve_run_model`), a local directory (holding a
    config.json), or the hub name itself. Raises RunError or ModelError naming ``key`` and the fix."""
    found = resolve_run_model(ref, key, runs_root_dir)
    if found is not None:
        return found.path
    p = Path(ref).expanduser()
    if p.exists():
        if not p.is_dir() or not ((p / "config.json").is_file() or (p / "adapter_config.json").is_file()):
            raise ModelError(f"{key}: {ref!r} has no config.json; give a directory written by save_pretrained")
        return p
    require_local(ref, key)
    return ref


def config_dir(model_dir: Path) -> Path | str:
    """The directory (or hub name) whose config.json describes the model in ``model_dir``: an
    adapter directory's base, else the directory itself."""
    adapter = model_dir / "adapter_config.json"
    if not adapter.is_file():
        return model_dir
    try:
        base = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError):
        return model_dir
    return Path(base) if isinstance(base, str) and Path(base).is_dir() else (base or model_dir)


def hub_options(m: Any, name: str | None) -> dict[str, Any]:
    """``from_pretrained`` arguments the model section asks for when ``name`` is loaded:
    ``trust_remote_code`` for any of its files, ``revision`` for the hub name in ``name_or_path``."""
    out: dict[str, Any] = {"trust_remote_code": True} if m.trust_remote_code else {}
    if m.revision is not None and name == m.name_or_path:
        out["revision"] = m.revision
    return out
