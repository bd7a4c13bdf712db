"""``clustertune`` and ``clustertune.api`` load what they export on first use (clustertune/lazy.py):
importing either loads none of the modules behind them, every exported name resolves to what
the module defining it holds, a name that is not exported is an AttributeError naming it, and
the package's own modules defer imports inside functions in at most 40 places (123 before the
lazy door; each one left says why, tests/unit/test_deferred_imports.py)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import clustertune
from clustertune import api
from clustertune.lazy import exports

PACKAGE = Path(clustertune.__file__).parent


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(m for m in sys.modules if m.startswith('clustertune'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_importing_the_api_loads_none_of_its_modules() -> None:
    assert _loaded_after("import clustertune.api") == ["clustertune", "clustertune.api", "clustertune.lazy"]
    # Reading one name loads the module behind it (and what that module imports), not the others.
    loaded = _loaded_after("import clustertune.api as a; a.data")
    assert "clustertune.api.data" in loaded and "clustertune.api.serving" not in loaded
    # Following a run (`status`, `logs`) loads neither the preflight nor the launcher's decisions.
    loaded = _loaded_after("import clustertune.api as a; a.refreshed")
    assert "clustertune.api.jobs" in loaded
    assert not {"clustertune.api.runs", "clustertune.api.preflight", "clustertune.launch.submit"} & set(loaded)


def test_every_exported_name_is_what_its_module_defines() -> None:
    from clustertune.api import jobs, runs

    assert sorted(api.__all__) == sorted(set(api.__all__)), "each name once"
    for name in api.__all__:
        value = getattr(api, name)
        if name in ("runs", "jobs", "data", "perf", "preflight", "serving", "tinker_proxy", "clusters", "sweeps",
                    "cluster_check", "cluster_show"):
            assert value is importlib.import_module(f"clustertune.api.{name}")
        elif name != "bench_variants":
            assert value is getattr(runs if hasattr(runs, name) else jobs, name), name
        assert name in dir(api)
    assert api.bench_variants() == ("clustertune", "clustertune-eager", "trainer", "trainer-compile")
    for name in clustertune.__all__:
        assert getattr(clustertune, name) is not None, name
    assert clustertune.run is api.run


def test_a_name_not_exported_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'clustertune.api' has no attribute 'decidee'"):
        api.decidee  # noqa: B018
    with pytest.raises(AttributeError, match="'clustertune' has no attribute 'runn'"):
        clustertune.runn  # noqa: B018
    assert not hasattr(api, "decidee")


def test_the_first_read_keeps_the_value_in_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "heavy.py").write_text("LOADS = []\nLOADS.append(1)\ndef f():\n    return 'f'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    package = importlib.import_module("lazypkg")
    package.__getattr__, package.__dir__ = exports("lazypkg", {"f": "lazypkg.heavy", "heavy": "lazypkg.heavy"})
    assert "lazypkg.heavy" not in sys.modules
    assert package.f() == "f" and "f" in vars(package)  # kept: the next read is a plain attribute
    assert package.heavy is sys.modules["lazypkg.heavy"] and package.heavy.LOADS == [1]  # loaded once
    assert sorted(n for n in dir(package) if not n.startswith("_")) == ["f", "heavy"]
    for name in ("lazypkg", "lazypkg.heavy"):
        monkeypatch.delitem(sys.modules, name)


def test_imports_inside_functions_stay_at_most_40() -> None:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if (isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("clustertune"))
                            or isinstance(node, ast.Import) and any(a.name.startswith("clustertune") for a in node.names)):
                        found.add((path.relative_to(PACKAGE).as_posix(), node.lineno))
    assert len(found) <= 40, f"{len(found)} imports of clustertune's modules inside functions: " \
                             "import at the top, or export through clustertune.api (clustertune/lazy.py)"
