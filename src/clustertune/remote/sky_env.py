"""SkyPilot's own Python environment: found, or built once and cached.

SkyPilot cannot be installed beside clustertune (it pins ``click<8.2``; the huggingface-hub
that transformers needs pins ``click>=8.4.2``), so it lives in a venv of its own and
clustertune only ever runs its Python as a separate process (:mod:`sky_bridge`). The venv is
keyed by a hash of ``sky_requirements.txt``: a changed pin builds a new one, an unchanged one
is reused. ``$CLUSTERTUNE_SKY_PYTHON`` names a SkyPilot Python the user installed instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from clustertune.errors import ClusterError
from clustertune.fsutil import file_lock

REQUIREMENTS = Path(__file__).with_name("sky_requirements.txt")
PYTHON_ENV = "CLUSTERTUNE_SKY_PYTHON"
VENVS_ENV = "CLUSTERTUNE_SKY_VENVS"
_READY = ".clustertune-ready"  # written last: a venv without it is a broken build


class SkyEnvMissing(ClusterError):
    """SkyPilot's environment is not there: `clustertune cloud setup` builds it."""


def requirements_hash() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]


def venvs_root() -> Path:
    env = os.environ.get(VENVS_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "clustertune" / "skypilot"


def venv_dir() -> Path:
    return venvs_root() / requirements_hash()


def sky_python() -> Path:
    """The Python that has SkyPilot: ``$CLUSTERTUNE_SKY_PYTHON``, else the cached venv."""
    env = os.environ.get(PYTHON_ENV)
    if env:
        path = Path(env).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SkyEnvMissing(f"${PYTHON_ENV}={env} is not an executable Python; point it at the python of an "
                                f"environment with SkyPilot installed, or unset it and run `clustertune cloud setup`")
        return path
    venv = venv_dir()
    if not (venv / _READY).is_file():
        raise SkyEnvMissing(f"SkyPilot's environment is not set up ({venv} is missing); run `clustertune cloud setup` "
                            f"(once; it installs {pinned()} into a venv of its own), or set ${PYTHON_ENV}")
    return venv / "bin" / "python"


def pinned() -> str:
    lines = [ln.strip() for ln in REQUIREMENTS.read_text().splitlines()]
    return ", ".join(ln for ln in lines if ln and not ln.startswith("#"))


def setup(python: str | None = None, quiet: bool = True) -> Path:
    """Build the venv for the current requirements unless it is there; returns its Python.
    A half-built venv (interrupted, pip failed) is removed and built again."""
    if os.environ.get(PYTHON_ENV):
        return sky_python()
    venv = venv_dir()
    if (venv / _READY).is_file():
        return venv / "bin" / "python"
    # Built in place (a venv's scripts name its path, so it cannot be built aside and renamed),
    # under a lock: a second process waits for the first one's build and then uses it.
    with file_lock(venv.with_name(f".{venv.name}.lock"), "SkyPilot's environment being built"):
        if (venv / _READY).is_file():
            return venv / "bin" / "python"
        if venv.exists():
            shutil.rmtree(venv)
        base = python or sys.executable
        _check_call([base, "-m", "venv", str(venv)], "creating the venv")
        pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *(["-q"] if quiet else [])]
        _check_call([*pip, "install", "-r", str(REQUIREMENTS)], f"installing {pinned()}")
        (venv / _READY).write_text(REQUIREMENTS.read_text())
    return venv / "bin" / "python"


def _check_call(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = proc.stdout.decode("utf-8", "replace").strip()[-3000:]
        raise ClusterError(f"cloud setup: {what} failed (exit {proc.returncode}):\n{tail}\n"
                           "check that the package index is reachable, then run `clustertune cloud setup` again")
