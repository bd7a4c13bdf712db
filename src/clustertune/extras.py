"""How to install clustertune's extras (pyproject's optional-dependencies: serve, deepspeed,
qlora...) into the install at hand. Every "install it with ..." hint clustertune prints comes
from :func:`install_hint`.

clustertune is not on a package index, so ``pip install 'clustertune[serve]'`` finds nothing.
What works depends on how this copy was installed:

- from a clone, editable (the package runs from ``src/`` beside the clone's pyproject.toml):
  ``bash CLONE/scripts/setup.sh serve`` when it runs in the clone's own ``.venv`` (what setup.sh
  makes), else ``PYTHON -m pip install -e 'CLONE[serve]'`` into the environment running it;
- from a local directory, not editable (pip's ``direct_url.json`` names it and it is still
  there): ``PYTHON -m pip install 'DIR[serve]'``;
- anywhere else (a wheel): the extra's own requirements, as the installed metadata lists them.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

# Set for the install commands of an extra: DeepSpeed would otherwise compile all its ops at
# install time; with DS_BUILD_OPS=0 the few that are used compile on first use and are cached.
# (scripts/setup.sh sets it itself.)
INSTALL_ENV = {"deepspeed": "DS_BUILD_OPS=0"}


@dataclass(frozen=True)
class Install:
    """How this copy of clustertune is installed: what :func:`install_command` needs."""

    python: str
    """The interpreter running clustertune (its pip installs where clustertune is)."""
    prefix: Path
    """``sys.prefix``: the environment (a venv's directory)."""
    source: Path | None = None
    """The clustertune source directory it was installed from, where it still exists."""
    editable: bool = False
    """Installed editable from ``source`` (its code is read from there)."""
    requires: tuple[str, ...] = ()
    """The installed metadata's requirements (``Requires-Dist``), with their extra markers."""


def installed_version(pkg: str) -> str | None:
    """The installed version of distribution ``pkg``, None where it is not installed."""
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def _is_clustertune_source(path: Path) -> bool:
    try:
        project = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return isinstance(project, dict) and project.get("name") == "clustertune"


def _installed_from() -> tuple[Path | None, bool]:
    """The local directory pip installed clustertune from (PEP 610's direct_url.json), and
    whether editable; (None, False) for a wheel, an index or no metadata at all."""
    try:
        text = metadata.distribution("clustertune").read_text("direct_url.json")
        record = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError):
        return None, False
    url = urlparse(str(record.get("url", "")))
    if url.scheme != "file" or "dir_info" not in record:
        return None, False
    return Path(unquote(url.path)), bool(record["dir_info"].get("editable"))


def this_install() -> Install:
    """How the clustertune running here is installed."""
    try:
        requires = tuple(metadata.requires("clustertune") or ())
    except metadata.PackageNotFoundError:
        requires = ()
    here = Path(__file__).resolve().parent  # .../src/clustertune in a clone
    tree = here.parent.parent
    if here.parent.name == "src" and _is_clustertune_source(tree):
        return Install(sys.executable, Path(sys.prefix), tree, True, requires)
    source, editable = _installed_from()
    if source is not None and not _is_clustertune_source(source):
        source, editable = None, False
    return Install(sys.executable, Path(sys.prefix), source, editable, requires)


def extra_requirements(requires: tuple[str, ...] | list[str], extra: str) -> list[str]:
    """The requirements an extra adds (``fastapi>=0.110; extra == 'serve'`` -> ``fastapi>=0.110``)."""
    out = []
    for line in requires:
        req, _, marker = line.partition(";")
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", marker):
            out.append(req.strip())
    return out


def install_command(install: Install, extras: tuple[str, ...]) -> str:
    """The shell command that installs ``extras`` into ``install``'s environment."""
    names = ",".join(extras)
    env = " ".join(dict.fromkeys(INSTALL_ENV[e] for e in extras if e in INSTALL_ENV))
    pip = f"{env + ' ' if env else ''}{shlex.quote(install.python)} -m pip install"
    src = install.source
    if src is not None:
        setup = src / "scripts" / "setup.sh"
        if install.editable and setup.is_file() and install.prefix.resolve() == (src / ".venv").resolve():
            return shlex.join(["bash", str(setup), *extras])
        return f"{pip} {'-e ' if install.editable else ''}{shlex.quote(f'{src}[{names}]')}"
    reqs = [r for e in extras for r in extra_requirements(install.requires, e)]
    if reqs:
        return f"{pip} {' '.join(shlex.quote(r) for r in dict.fromkeys(reqs))}"
    # No source and no metadata naming the extra: say what to do, not a command that cannot work.
    return f"reinstall clustertune from its source with {pip} -e 'CLONE[{names}]'"


def install_hint(*extras: str) -> str:
    """How to install ``extras`` (names of pyproject's optional-dependencies) here."""
    return install_command(this_install(), extras)
