"""The launcher stays light: no module of ``clustertune.launch`` imports torch when it is
imported (training imports it where it trains, in the ranks or the in-process attempt)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BLOCKED = textwrap.dedent("""
    import importlib, importlib.abc, pkgutil, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"{name} imported while importing the launcher")
            return None

    sys.meta_path.insert(0, NoTorch())
    import clustertune.launch as pkg
    names = sorted(m.name for m in pkgutil.walk_packages(pkg.__path__, "clustertune.launch."))
    for name in names:
        importlib.import_module(name)
    print(len(names), "modules")
""")


def test_every_launch_module_imports_without_torch() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[0]) >= 9  # the package's modules were all there to import


def test_the_code_sent_to_ssh_hosts_is_the_whole_package() -> None:
    # Hosts run `python -m clustertune.train.entry` from this copy: it must be the package's root.
    import clustertune
    from clustertune.launch.ssh import _code_files

    pkg, files, _ = _code_files()
    assert pkg == Path(clustertune.__file__).resolve().parent
    assert {"__init__.py", "train/entry.py", "script/rank.py", "launch/ssh/__init__.py"} <= set(files)
