"""A package's exports loaded on first use (PEP 562), the one way clustertune defers its own imports.

``clustertune`` and ``clustertune.api`` list what they export and the module that defines each
name; the module is imported when the name is first read, and the value then stays in the
package's namespace. So the CLI's start-up (which imports both) loads neither the launcher nor
the data, serving or training side, while each module behind them imports what it needs at its
top, where a reader sees it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def exports(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``where`` maps each exported name to the
    module that defines it (a name that is that module's own last part is the module itself)."""

    def __getattr__(name: str) -> Any:
        target = where.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        value = module if target == f"{package}.{name}" else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
