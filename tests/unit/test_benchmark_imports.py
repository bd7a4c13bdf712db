"""The benchmarks are run by hand, not by CI, so a refactor that moves a function breaks them
silently (gpu_check.py once imported a helper that had moved). Every name they import from
clustertune, at the top of a file or inside a function, must still be there."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _missing(folder: Path) -> list[str]:
    missing = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "clustertune"):
                continue
            where = f"{path.name}:{node.lineno}"
            try:
                module = importlib.import_module(node.module or "")
            except ImportError as exc:
                missing.append(f"{where}: {node.module} ({exc})")
                continue
            for alias in node.names:
                if hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")  # a submodule
                except ImportError:
                    missing.append(f"{where}: {node.module}.{alias.name}")
    return missing


def test_every_name_a_benchmark_imports_from_clustertune_exists() -> None:
    assert list(BENCHMARKS.glob("*.py")), BENCHMARKS
    assert _missing(BENCHMARKS) == []


def test_the_check_sees_a_name_that_moved(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("def f():\n    from clustertune.api import preflight\n")
    assert _missing(tmp_path) == ["old.py:2: clustertune.api.preflight"]
