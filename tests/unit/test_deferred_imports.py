"""The package's own modules are imported at the top of each module; an import inside a function
is there only to keep a heavy library out of a light module's import (the CLI's start-up), and
says so in a comment on its line or just above it (or above the block of imports it is in)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import clustertune

PACKAGE = Path(clustertune.__file__).parent


def _deferred_without_a_reason() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                own = (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("clustertune")
                       or isinstance(node, ast.Import) and any(a.name.startswith("clustertune") for a in node.names))
                if not own:
                    continue
                line, i = lines[node.lineno - 1], node.lineno - 2
                while i >= 0 and lines[i].strip().startswith(("from ", "import ")):
                    i -= 1  # a comment above a block of imports covers the block
                if "#" not in line and not (i >= 0 and lines[i].strip().startswith("#")):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {line.strip()}")
    return sorted(set(found))


def test_every_import_inside_a_function_says_why() -> None:
    assert _deferred_without_a_reason() == []


def test_the_check_sees_an_unexplained_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "clustertune"
    pkg.mkdir()
    (pkg / "mod.py").write_text("def f():\n    from clustertune.errors import UserError\n    return UserError\n\n"
                                "def g():\n    # Deferred: a reason.\n    from clustertune import fsutil\n    return fsutil\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    assert _deferred_without_a_reason() == ["clustertune/mod.py:2: from clustertune.errors import UserError"]


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    import subprocess

    heavy = ("torch", "numpy", "transformers", "fastapi", "uvicorn", "asyncio", "gguf")
    code = f"import sys, clustertune.cli.main; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_plain_run_imports_neither_deepspeed_nor_peft(tmp_path: Path) -> None:
    """A run without DeepSpeed or an adapter trains, saves its model and unwraps it without
    importing deepspeed (Accelerate's unwrap probes for its engine: models/saving.py) or peft
    (transformers' seeding and schedules import it: train/schedule.py), 1.5-3 s of each rank's
    start between them; the saved model is the whole model all the same."""
    import subprocess

    import yaml

    from tests.helpers import TINY_CAUSAL, with_

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={"max_steps": 2})))
    code = ("import sys; from clustertune.cli.main import main; "
            f"rc = main(['run', {str(recipe)!r}, '--runs-root', {str(tmp_path / 'runs')!r}, '--no-progress']); "
            "print(rc, sorted(m for m in ('deepspeed', 'peft', 'bitsandbytes') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout[-2000:]
    (model,) = (tmp_path / "runs").glob("*/model")
    from safetensors import safe_open

    with safe_open(str(model / "model.safetensors"), "pt") as f:
        assert "transformer.h.1.mlp.c_fc.weight" in set(f.keys())
