"""The wheels carried to a GPU machine (benchmarks/gpu-wheels.lock) are checked offline: they
fit the budget, and every third-party module that the GPU scripts import, directly or through
the clustertune modules they reach, is on the GPU image or in the lock. Nothing is downloaded."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH, SRC = ROOT / "benchmarks", ROOT / "src"
LOCK, IMAGE = BENCH / "gpu-wheels.lock", BENCH / "gpu-image-packages.txt"
BUDGET = 60 * 2**20

def gpu_scripts() -> list[Path]:
    """What runs on the GPU machine: the harness and the scripts it starts by path (its SCRIPTS,
    read from its source: the harness is standard library only, but importing it is not needed)."""
    tree = ast.parse((BENCH / "gpu_hour.py").read_text(encoding="utf-8"))
    (names,) = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "SCRIPTS" for t in n.targets)]
    return [BENCH / "gpu_hour.py", *(BENCH / n for n in names)]

# Import names whose distribution is named otherwise.
DISTRIBUTION = {"yaml": "pyyaml", "huggingface_hub": "huggingface-hub", "google": "protobuf"}


def lock_rows(text: str) -> list[dict[str, str | int]]:
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, version, kind, sha, size, why = line.split(maxsplit=5)
        rows.append({"name": name, "version": version, "kind": kind, "sha256": sha, "bytes": int(size), "why": why})
    return rows


def image_packages() -> set[str]:
    return {w for line in IMAGE.read_text().splitlines() if not line.startswith("#") for w in line.split()}


def _module_file(name: str, bench: Path) -> Path | None:
    parts = name.split(".")
    if parts[0] != "clustertune":
        return bench / f"{name}.py" if len(parts) == 1 and (bench / f"{name}.py").exists() else None
    base = SRC.joinpath(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.exists():
            return f
    return None


def third_party_imports(scripts: list[Path]) -> dict[str, str]:
    """Top-level third-party module -> the name of a file importing it, over every module reachable
    from ``scripts`` by imports (at module level or inside functions) of clustertune modules and
    sibling scripts. Conservative: an import inside a function counts."""
    seen: set[Path] = set()
    found: dict[str, str] = {}
    todo = list(scripts)
    local_helpers = {p.stem for p in (SRC / "clustertune" / "remote").glob("runner*.py")}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Imports under `if TYPE_CHECKING:` name types for annotations only; they never run.
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                       for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                f = _module_file(name, path.parent)
                if f is not None:
                    todo.append(f)
                    continue
                top = name.split(".")[0]
                # The SSH helper's modules travel under _clustertune_* names beside runner.py.
                if (top in sys.stdlib_module_names or top == "clustertune" or (path.parent / f"{top}.py").exists()
                        or top.removeprefix("_clustertune_") in local_helpers):
                    continue
                found.setdefault(top, path.name)
    return found


def _dist(module: str) -> str:
    return DISTRIBUTION.get(module, module).lower().replace("_", "-")


def test_the_lock_is_well_formed_and_fits_the_budget() -> None:
    rows = lock_rows(LOCK.read_text())
    sizes = "\n".join(f"{r['name']:<18} {r['version']:<8} {r['bytes'] / 2**20:7.2f} MiB" for r in rows)
    total = sum(int(r["bytes"]) for r in rows if r["kind"] != "optional-wheel")  # those travel in place of others
    print(f"{sizes}\n{'total':<27} {total / 2**20:7.2f} MiB of {BUDGET / 2**20:.0f}")
    assert total <= BUDGET, sizes
    names = [str(r["name"]) for r in rows]
    assert len(names) == len(set(names)), "one version of each: two stop the whole install"
    for r in rows:
        assert re.fullmatch(r"[0-9a-f]{64}", str(r["sha256"])), r
        assert r["kind"] in ("wheel", "sdist", "optional-wheel") and int(r["bytes"]) > 0 and len(str(r["why"])) > 10, r
    # The packages the image already has travel only for another version (and none is pandas
    # or matplotlib: too big for what they do here).
    assert not {"pandas", "matplotlib"} & set(names)


def test_every_module_the_gpu_scripts_import_is_on_the_image_or_in_the_lock() -> None:
    scripts = gpu_scripts()
    assert all(p.exists() for p in scripts) and len(scripts) > 3
    imported = third_party_imports(scripts)
    # The walk does reach the training code and its optional parts.
    assert {"torch", "transformers", "accelerate", "pydantic", "deepspeed", "trl"} <= set(imported)
    have = image_packages() | {str(r["name"]) for r in lock_rows(LOCK.read_text())}
    missing = {m: where for m, where in imported.items() if _dist(m) not in have}
    assert missing == {}


def test_the_check_sees_a_module_that_is_neither_there_nor_carried(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("def f():\n    import zstandard\n")
    (tmp_path / "gpu.py").write_text("import helper\nfrom clustertune.train.precision import mixed_precision\n")
    imported = third_party_imports([tmp_path / "gpu.py"])
    assert imported["zstandard"] == "helper.py"
    assert "torch" in imported  # reached through clustertune.train.precision
    assert "zstandard" not in image_packages()
