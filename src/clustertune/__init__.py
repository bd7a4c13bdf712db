"""clustertune: fine-tune and train Hugging Face transformers on the hardware you have.

The Python API mirrors the command line::

    import clustertune as ct
    recipe = ct.load_recipe("quickstart", ["train.max_steps=50"])   # file, shipped name or dict
    run = ct.run(recipe)                                             # trains; returns the Run
    ct.get_run(run.id).state                                         # COMPLETED (RunState.COMPLETED)
    run.summary["final_eval"], run.metrics                           # summary.json, metrics.jsonl rows
    ct.run(resume=run_id)                                            # continue a stopped run
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clustertune.lazy import exports

if TYPE_CHECKING:
    from clustertune.api import run
    from clustertune.calls.functions import function, get_ref
    from clustertune.calls.objects import cls
    from clustertune.errors import UserError
    from clustertune.recipe import Recipe, load_recipe, shipped_recipes
    from clustertune.remote.cluster import cluster
    from clustertune.remote.envs import Env
    from clustertune.runs import Run, RunState, get_run, list_runs

__version__ = "0.1.0"

# Exports loaded on first use: `import clustertune.script` (the helper a user's own script
# imports on every rank) then loads no third-party module; `ct.Recipe` still works as before.
_LAZY: dict[str, str] = {
    "UserError": "clustertune.errors", "Recipe": "clustertune.recipe", "load_recipe": "clustertune.recipe",
    "shipped_recipes": "clustertune.recipe", "Run": "clustertune.runs", "RunState": "clustertune.runs",
    "get_run": "clustertune.runs", "list_runs": "clustertune.runs",
    # what a remote call runs in: ct.Env(requirements=[...], site_packages_from=..., secrets=[...])
    "Env": "clustertune.remote.envs",
    "run": "clustertune.api",  # a recipe's run, or a resume: clustertune.api.run
    # Runhouse-style remote execution: ct.cluster(name), ct.function(fn).to(...), ct.get_ref(key), ct.cls(Class)
    "cluster": "clustertune.remote.cluster", "function": "clustertune.calls.functions",
    "get_ref": "clustertune.calls.functions", "cls": "clustertune.calls.objects",
}


__getattr__, __dir__ = exports(__name__, _LAZY)


__all__ = ["Env", "cls", "cluster", "function", "get_ref", "Recipe", "Run", "RunState", "UserError", "get_run", "list_runs", "load_recipe", "run", "shipped_recipes", "__version__"]
