"""scripts/setup.sh installs the extras it is given (pyproject's optional-dependencies) into the
project's .venv: several at once, an unknown one refused, one install stamp per set of extras.

The script runs for real on a copy of the project's pyproject.toml; only the venv's python is a
stand-in that records the pip commands it is asked to run instead of installing anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The stand-in for .venv/bin/python: `-m pip ...` is written to $PIP_LOG (with DS_BUILD_OPS);
# the script's import checks pass unless $NO_TORCH asks for torch to be missing; anything else
# (reading pyproject.toml's extras) runs on this interpreter.
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  shift 2
  echo "DS_BUILD_OPS=${DS_BUILD_OPS:-} $*" >> "$PIP_LOG"
  exit 0
fi
if [ "$1" = "-c" ]; then
  case "$2" in
    "import torch") [ -z "${NO_TORCH:-}" ]; exit $? ;;
    "import clustertune"*) exit 0 ;;
  esac
fi
exec %s "$@"
"""


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON % sys.executable)
    python.chmod(0o755)
    return tmp_path


def setup(project: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run the script; what it ran pip with, one line per call, since the last call."""
    log = project / "pip.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(["bash", str(project / "scripts" / "setup.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, "PIP_LOG": str(log), **env}, timeout=60)
    pip = log.read_text().splitlines() if log.exists() else []
    return done, [line.replace("--disable-pip-version-check -q ", "") for line in pip]


def test_several_extras_install_together_in_any_order(project: Path) -> None:
    done, pip = setup(project, "serve", "deepspeed")
    assert done.returncode == 0, done.stderr
    assert pip == ["DS_BUILD_OPS=0 install -e .[deepspeed,serve]"]
    assert "setup: installing clustertune [deepspeed,serve]" in done.stderr
    done, pip = setup(project, "deepspeed", "serve", "serve")  # the same set: installed already
    assert done.returncode == 0 and pip == []


# The test extra also brings the tinker-cookbook, without its dependencies (pyproject.toml says why).
TEST_INSTALL = ["DS_BUILD_OPS=0 install -e .[test]", "DS_BUILD_OPS= install --no-deps tinker-cookbook==0.6.1",
                "DS_BUILD_OPS= install --no-deps --upgrade --target .venv/fp8-extra torchao==0.18.0"]


def test_each_set_of_extras_has_its_own_stamp(project: Path) -> None:
    assert setup(project, "test")[1] == TEST_INSTALL
    assert setup(project)[1] == ["DS_BUILD_OPS=0 install -e ."]
    assert setup(project, "tinker")[1] == ["DS_BUILD_OPS=0 install -e .[tinker]"]
    assert setup(project, "test")[1] == [] and setup(project)[1] == [] and setup(project, "tinker")[1] == []
    # another pyproject.toml (a dependency added) installs again
    with (project / "pyproject.toml").open("a") as f:
        f.write("\n# changed\n")
    assert setup(project, "test")[1] == TEST_INSTALL


def test_torch_comes_first_where_the_venv_has_none(project: Path) -> None:
    done, pip = setup(project, "serve", NO_TORCH="1", CLUSTERTUNE_TORCH="torch==2.4.0")
    assert done.returncode == 0, done.stderr
    assert pip == ["DS_BUILD_OPS= install torch==2.4.0", "DS_BUILD_OPS=0 install -e .[serve]"]


def test_an_unknown_extra_is_refused_with_the_list(project: Path) -> None:
    done, pip = setup(project, "serve", "sevre")
    assert done.returncode == 2 and pip == []
    assert "no extra 'sevre' in pyproject.toml" in done.stderr and " serve " in done.stderr
    done = subprocess.run(["bash", str(project / "scripts" / "setup.sh"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "bash scripts/setup.sh serve deepspeed" in done.stdout
    assert "deepspeed" in done.stdout.splitlines()[-1] and done.stdout.splitlines()[-1].startswith("extras:")
