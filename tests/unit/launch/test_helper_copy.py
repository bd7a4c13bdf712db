"""The helper copied into a run directory (``lib/clustertune/script``) serves scripts on nodes
without clustertune, and never hides an installed clustertune from a command that uses all of it
(``clustertune serve`` as a run's command, a script calling ``ct.function``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import clustertune
from clustertune.launch.command import copy_helper
from clustertune.runs.paths import RunPaths

CODE = "import clustertune.script as s; print(s.__file__); import clustertune.cli.main; print('cli ok')"


def _python(lib: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(lib)}
    return subprocess.run([sys.executable, *flags, "-c", CODE], capture_output=True, text=True, env=env, timeout=120)


def test_the_copy_serves_only_where_clustertune_is_not_installed(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path / "run")
    copy_helper(paths)
    installed = _python(paths.script_lib)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.splitlines() == [str(Path(clustertune.__file__).parent / "script" / "__init__.py"), "cli ok"]
    # no site-packages: the copy is what imports (and the rest of clustertune is not there)
    bare = _python(paths.script_lib, "-S")
    assert bare.stdout.splitlines()[0] == str(paths.script_lib / "clustertune" / "script" / "__init__.py")
    assert "No module named 'clustertune.cli'" in bare.stderr
