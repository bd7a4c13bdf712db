"""Shell completion of argument values: recipe names and files, run ids, recipe keys."""

from __future__ import annotations

from pathlib import Path
from clustertune.recipe.keys import all_keys
from clustertune.runs.store import LAST, list_runs
from clustertune.recipe.load import shipped_recipes


def complete_recipe(incomplete: str) -> list[str]:
    """Shipped recipe names, then YAML files and directories that start with what was typed."""

    names = [n for n in shipped_recipes() if n.startswith(incomplete)]
    head = incomplete[: incomplete.rfind("/") + 1]  # the folder part as typed ("", "./", "configs/", "/abs/")
    stem = incomplete[len(head):]
    try:
        found = sorted(p for p in Path(head or ".").iterdir() if p.name.startswith(stem) and not p.name.startswith(".")
                       and (p.is_dir() or p.suffix in (".yaml", ".yml")))
    except OSError:
        found = []
    shown = [head + p.name + ("/" if p.is_dir() else "") for p in found]
    return names + shown


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
