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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustertune.errors import UserError
    from clustertune.recipe import Recipe, load_recipe, shipped_recipes
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
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'clustertune' has no attribute {name!r}")


def run(*args, **kwargs):  # noqa: ANN002, ANN003 - signature documented on clustertune.api.run
    """Run a recipe or resume a run; see :func:`clustertune.api.run`."""
    # Deferred: `import clustertune` stays free of pydantic, cloudpickle and torch.
    from clustertune.api import run as _run

    return _run(*args, **kwargs)


def cluster(name: str, accept_new_host_keys: bool = False):  # noqa: ANN201 - lazy import keeps the CLI's start cheap
    """A configured SSH cluster; see :func:`clustertune.remote.cluster.cluster`."""
    # Deferred: `import clustertune` stays free of pydantic, cloudpickle and torch.
    from clustertune.remote.cluster import cluster as _cluster

    return _cluster(name, accept_new_host_keys)


def function(fn):  # noqa: ANN001, ANN201
    """Run ``fn`` on a cluster: ``ct.function(fn).to(cluster, env=[...])``."""
    # Deferred: `import clustertune` stays free of pydantic, cloudpickle and torch.
    from clustertune.calls.functions import function as _function

    return _function(fn)


def get_ref(run_key: str):  # noqa: ANN201
    """The ref of an earlier remote call, from any process; see :func:`clustertune.calls.functions.get_ref`."""
    # Deferred: `import clustertune` stays free of pydantic, cloudpickle and torch.
    from clustertune.calls.functions import get_ref as _get_ref

    return _get_ref(run_key)


def cls(klass):  # noqa: ANN001, ANN201
    """A long-lived remote object: ``ct.cls(Model).to(cluster, env=[...])(*init_args)``."""
    # Deferred: `import clustertune` stays free of pydantic, cloudpickle and torch.
    from clustertune.calls.objects import cls as _cls

    return _cls(klass)


__all__ = ["Env", "cls", "cluster", "function", "get_ref", "Recipe", "Run", "RunState", "UserError", "get_run", "list_runs", "load_recipe", "run", "shipped_recipes", "__version__"]
