"""Environments: requirements + env vars, built as a virtualenv per host, keyed by a hash.

The hash covers everything that changes what gets installed (requirements, indexes, pip
options, the base Python, the contents of local packages); env vars do not enter it, they are
set per call. Secret values are named here and read from the local environment at call time:
they travel to the remote process on stdin, never in argv or files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clustertune.errors import EnvError

_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Env:
    """What a remote call runs with."""

    requirements: tuple[str, ...] = ()
    """pip requirement strings: ``name==1.2``, ``git+https://...@rev``, or a local package
    folder or wheel file (copied to the host and installed from there)."""
    env_vars: Mapping[str, str] = field(default_factory=dict)
    """Plain environment variables (not secret: they may show up in process listings)."""
    secrets: tuple[str, ...] = ()
    """Names of local environment variables whose values the remote process gets (HF_TOKEN...)."""
    index_url: str | None = None
    """Replaces PyPI, e.g. a mirror."""
    extra_index_urls: tuple[str, ...] = ()
    """Extra package indexes, e.g. PyTorch's CUDA wheel index."""
    pip_args: tuple[str, ...] = ()
    """Extra ``pip install`` options (``--no-build-isolation``, ``--no-index``...)."""
    system_site_packages: bool = False
    """Let the env see the host Python's own packages."""
    site_packages_from: str | None = None
    """A Python on the host whose site-packages the env also sees (reuse an existing install,
    e.g. torch, instead of installing it again)."""
    torch_cpu_index: str | None = TORCH_CPU_INDEX
    """Where torch (torchvision, torchaudio) comes from on hosts without a GPU: PyTorch's CPU
    wheels, a few hundred MB instead of the GBs of CUDA libraries PyPI's build pulls in.
    None: the usual indexes everywhere."""
    pip_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for pip while the env is built (``PIP_CONFIG_FILE``, a proxy);
    not secret: they are part of the env's spec on the host."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "requirements", tuple(self.requirements))
        object.__setattr__(self, "secrets", tuple(self.secrets))
        object.__setattr__(self, "extra_index_urls", tuple(self.extra_index_urls))
        object.__setattr__(self, "pip_args", tuple(self.pip_args))
        for r in self.requirements:
            if not isinstance(r, str) or not r.strip():
                raise EnvError(f"env requirement {r!r} is not a requirement string")
        for name in list(self.env_vars) + list(self.secrets):
            if not _VAR_RE.match(name):
                raise EnvError(f"env variable name {name!r} is not valid (letters, digits, '_')")

    @classmethod
    def of(cls, env: Env | Iterable[str] | None) -> Env:
        if env is None:
            return cls()
        if isinstance(env, Env):
            return env
        if isinstance(env, str):
            return cls(requirements=(env,))
        return cls(requirements=tuple(env))

    def local_packages(self) -> list[Path]:
        return [Path(r).expanduser().resolve() for r in self.requirements if _is_local_path(r)]

    def spec(self, host_python: str) -> dict:
        """The JSON the host's helper builds the env from (local paths rewritten by the caller)."""
        return {
            "requirements": list(self.requirements),
            "index_url": self.index_url,
            "extra_index_urls": list(self.extra_index_urls),
            "pip_args": list(self.pip_args),
            "system_site_packages": self.system_site_packages,
            "site_packages_from": self.site_packages_from,
            "torch_cpu_index": self.torch_cpu_index,
            "pip_env": dict(self.pip_env),
            "python": host_python,
        }

    def content_hash(self, host_python: str) -> str:
        spec = self.spec(host_python)
        spec["local"] = {str(p): tree_hash(p) for p in self.local_packages()}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def runtime_vars(self) -> dict[str, str]:
        """Env vars for the remote process: plain ones plus the values of the named secrets."""
        out = dict(self.env_vars)
        missing = [n for n in self.secrets if n not in os.environ]
        if missing:
            raise EnvError(f"secret env var(s) {', '.join(missing)} are not set here; export them before calling "
                           "(their values are passed to the remote process, never stored)")
        out.update({n: os.environ[n] for n in self.secrets})
        return out


def _is_local_path(req: str) -> bool:
    return req.startswith((".", "/", "~")) and Path(req).expanduser().exists()


# -- folder contents ---------------------------------------------------------------------------

_ALWAYS_SKIP = {".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def folder_files(root: Path) -> list[str]:
    """Files of a folder to sync (relative paths), respecting .gitignore: git's own answer
    inside a work tree, else the folder's top-level .gitignore patterns."""
    import fnmatch
    import subprocess

    root = root.resolve()
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard", "--", "."],
                             capture_output=True, timeout=30)
        in_git = out.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        in_git = False
    if in_git:
        files = [f for f in out.stdout.decode("utf-8", "surrogateescape").split("\0") if f]
        return sorted(f for f in files if (root / f).is_file() and not (_ALWAYS_SKIP & set(Path(f).parts)))
    patterns: list[str] = []
    gi = root / ".gitignore"
    if gi.is_file():
        patterns = [p.strip().rstrip("/") for p in gi.read_text().splitlines() if p.strip() and not p.startswith("#")]
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = [d for d in dirnames if d not in _ALWAYS_SKIP
                       and not any(fnmatch.fnmatch(d, p) or fnmatch.fnmatch(str(rel_dir / d), p) for p in patterns)]
        for f in filenames:
            rel = str(rel_dir / f) if str(rel_dir) != "." else f
            if not any(fnmatch.fnmatch(f, p) or fnmatch.fnmatch(rel, p) for p in patterns):
                files.append(rel)
    return sorted(files)


def tree_hash(root: Path, files: list[str] | None = None) -> str:
    """Content hash of a folder's files (or of one file, e.g. a wheel)."""
    h = hashlib.sha256()
    if root.is_file():
        h.update(root.name.encode() + b"\0" + hashlib.sha256(root.read_bytes()).digest())
        return h.hexdigest()[:16]
    for rel in files if files is not None else folder_files(root):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        h.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return h.hexdigest()[:16]
