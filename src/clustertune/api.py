"""The Python API the CLI calls: load a recipe, run it (or resume a run), look runs up.

>>> import clustertune as ct
>>> recipe = ct.load_recipe("quickstart", ["train.max_steps=20"])
>>> run = ct.run(recipe)
>>> run.state, run.paths.model
"""

from __future__ import annotations

import os
from typing import Any

from clustertune.errors import UserError
from clustertune.launch.submit import launch
from clustertune.recipe.launch_checks import gpus_requested
from clustertune.recipe.load import load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run


def devices_of(recipe: Recipe) -> int:
    """How many devices (training processes) a run of ``recipe`` spans: nodes x ranks per node,
    a node's ranks being ``procs_per_node``, else the GPUs the launch section asks for, else 1."""
    ln = recipe.launch
    return ln.nodes * (ln.procs_per_node or gpus_requested(ln) or 1)



def run(
    source: Recipe | str | os.PathLike[str] | dict[str, Any] | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    command: list[str] | None = None,
    trust_checkpoint: bool = False,
) -> Run:
    """Run a recipe (a Recipe, a YAML path, a shipped name or a dict) or resume a run by id.

    Returns the finished :class:`Run` (a SLURM run: once submitted). User errors raise
    :class:`UserError` subclasses before anything is written when they can be found up front;
    a failure during training leaves the run FAILED with the reason (and traceback) in run.json.
    Where it runs (this process, torchrun, SLURM, SSH hosts) is decided by
    :func:`clustertune.launch.submit.launch`, once.
    """
    if resume is not None:
        if source is not None or overrides:
            raise UserError("--resume takes only the run id: the run keeps its resolved recipe")
        return launch(None, resume=resume, runs_root_dir=runs_root_dir, command=command, show_progress=show_progress,
                      trust_checkpoint=trust_checkpoint)
    if trust_checkpoint:
        raise UserError("trust_checkpoint applies to resume=RUN_ID (the checkpoint it resumes from)")
    if isinstance(source, Recipe):
        recipe = source if not overrides else load_recipe(source.to_plain(), overrides)
    elif source is None:
        raise UserError("give a recipe (a YAML file or a shipped name; `clustertune recipes` lists them)")
    else:
        recipe = load_recipe(source, overrides)
    return launch(recipe, runs_root_dir=runs_root_dir, command=command, show_progress=show_progress)
