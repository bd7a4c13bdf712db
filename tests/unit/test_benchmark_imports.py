"""The benchmarks are run by hand, not by CI, so a refactor that moves a function breaks them
silently (gpu_check.py once imported a helper that had moved). Every name they import from
clustertune, at the top of a file or inside a function, must still be there; so must every
attribute they use of a module imported whole (``import clustertune.train.execute as node``)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _missing(folder: Path) -> list[str]:
    missing = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        missing += _missing_attributes(path.name, tree)
        for node in ast.walk(tree):
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


def _missing_attributes(name: str, tree: ast.AST) -> list[str]:
    """``alias.attr`` uses of ``import clustertune.x as alias`` whose module has no ``attr``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "clustertune" and a.asname:
                    aliases[a.asname] = a.name
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module_name = aliases[node.value.id]
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                missing.append(f"{name}:{node.lineno}: {module_name} ({exc})")
                continue
            if not hasattr(module, node.attr):
                missing.append(f"{name}:{node.lineno}: {module_name}.{node.attr}")
    return sorted(set(missing))


def test_every_name_a_benchmark_imports_from_clustertune_exists() -> None:
    assert list(BENCHMARKS.glob("*.py")), BENCHMARKS
    assert _missing(BENCHMARKS) == []


def test_the_check_sees_a_name_that_moved(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("def f():\n    from clustertune.api import gone_away\n")
    assert _missing(tmp_path) == ["old.py:2: clustertune.api.gone_away"]


def test_the_check_sees_an_attribute_of_a_module_that_moved(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text("def f():\n    import clustertune.train.execute as node\n    node.gone()\n")
    assert _missing(tmp_path) == ["old.py:3: clustertune.train.execute.gone"]


def test_a_failed_launch_is_reported_by_its_exception_line_not_torchruns_closing_rule() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", BENCHMARKS / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    tail = ("[rank0]:   File \"x.py\", line 3, in f\n"
            "[rank0]: RuntimeError: Expected all tensors to be on the same device\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============================================================\n"
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
            "============================================================\n")
    assert gpu_check.cause(tail) == "RuntimeError: Expected all tensors to be on the same device"
    assert gpu_check.cause("just a message\n") == "just a message"
