"""Shell completion of argument values: recipe names and files, run ids, models, recipe keys
and ``key=`` overrides."""

from __future__ import annotations

from pathlib import Path
from clustertune.recipe.keys import all_keys
from clustertune.runs.store import LAST, list_runs
from clustertune.recipe.load import shipped_recipes


def complete_recipe(incomplete: str) -> list[str]:
    """Shipped recipe names, then YAML files and directories that start with what was typed."""

    names = [n for n in shipped_recipes() if n.startswith(incomplete)]
    return names + _paths(incomplete, (".yaml", ".yml"))


def _paths(incomplete: str, suffixes: tuple[str, ...]) -> list[str]:
    """Directories, and files with these suffixes, that start with what was typed."""
    head = incomplete[: incomplete.rfind("/") + 1]  # the folder part as typed ("", "./", "configs/", "/abs/")
    stem = incomplete[len(head):]
    try:
        found = sorted(p for p in Path(head or ".").iterdir() if p.name.startswith(stem) and not p.name.startswith(".")
                       and (p.is_dir() or p.suffix in suffixes))
    except OSError:
        found = []
    return [head + p.name + ("/" if p.is_dir() else "") for p in found]


def complete_shipped(incomplete: str) -> list[str]:
    return [n for n in shipped_recipes() if n.startswith(incomplete)]


def complete_run_id(incomplete: str) -> list[str]:
    """The run ids under the runs root, newest first, after ``last``."""

    try:
        ids = [r.id for r in list_runs(None)]
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        ids = []
    return [i for i in [LAST, *reversed(ids)] if i.startswith(incomplete)]


def complete_key(incomplete: str) -> list[str]:
    return [d.key for d in all_keys() if d.key.startswith(incomplete)]


def complete_model(incomplete: str) -> list[str]:
    """What generate, chat, eval and serve take: run ids (after ``last``), then directories."""
    if "/" in incomplete or incomplete.startswith((".", "~")):
        return _paths(incomplete, ())
    return complete_run_id(incomplete) + _paths(incomplete, ())


def complete_override(incomplete: str) -> list[str]:
    """Recipe keys as ``key=`` for the overrides after a recipe (nothing once a value is typed)."""
    if "=" in incomplete:
        return []
    return [f"{d.key}=" for d in all_keys() if d.key.startswith(incomplete) and "[]" not in d.key]


def complete_launch_key(incomplete: str) -> list[str]:
    """``launch.*`` keys as ``key=`` (what `clustertune launch` and `serve` take besides a file)."""
    return [k for k in complete_override(incomplete) if k.startswith("launch.")]


def complete_launch_item(incomplete: str) -> list[str]:
    """`clustertune launch`'s items: a YAML file with a launch section, or ``launch.*`` keys."""
    return complete_launch_key(incomplete) + _paths(incomplete, (".yaml", ".yml"))
