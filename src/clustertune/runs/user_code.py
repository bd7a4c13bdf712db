"""The user's own Python, named in a recipe as ``module:function`` (reward functions, metrics).

Modules are looked up as ``python -m`` would find them: the current directory first (users keep
such files beside their recipes), then ``PYTHONPATH``. Every failure is the user's error, of the
type the caller names, saying which module, what ``sys.path`` was, and the user's own traceback
without clustertune's frames in front of it.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.runs.paths import FILES_ENV


def use_run_files(folder: Path) -> None:
    """A run's files/ folder (``launch.files``, reward modules beside the recipe), where the
    user's code finds it: named in ``CLUSTERTUNE_FILES`` and first on ``sys.path``."""
    if not folder.is_dir():
        return
    os.environ[FILES_ENV] = str(folder)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def import_function(spec: str, key: str, what: str, error: type[UserError]) -> Callable[..., Any]:
    """``module:attr`` -> the callable; ``error`` (naming ``key``) when it cannot be had."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        shown = [p or "(current directory)" for p in sys.path]
        raise error(
            f"{key}: cannot import module {module_name!r} for {what} {spec!r}: {exc}. "
            f"Looked on sys.path = {shown}; put the module in the current directory or on PYTHONPATH"
        ) from exc
    except Exception as exc:  # the module itself failed while importing: the user's traceback
        raise error(f"{key}: importing {module_name!r} raised:\n{user_traceback(exc)}") from exc
    fn = getattr(module, attr, None)
    if fn is None:
        names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise error(f"{key}: module {module_name!r} has no attribute {attr!r}; its callables are {', '.join(names) or '(none)'}")
    if not callable(fn):
        raise error(f"{key}: {spec!r} is a {type(fn).__name__}, not a function")
    return fn


def user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without our own frames in front of the user's code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get("__name__", "").startswith(("clustertune.", "importlib")):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
