"""Clusters of SSH hosts and the client identity key, kept in the user's config directory.

``$CLUSTERTUNE_CONFIG_DIR`` (default ``$XDG_CONFIG_HOME/clustertune`` or
``~/.config/clustertune``) holds ``clusters.yaml`` and ``identity.key``. Both are written with
mode 0600: the identity key (``clustertune.identity``) signs what this client stores on remote
hosts, so that results are only ever unpickled from run keys this client created.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from clustertune.errors import ClusterError
from clustertune.fsutil import atomic_write_text
# The identity key lives below the layers that use it (the node side checks checkpoints with it).
from clustertune.identity import config_dir, identity_key

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Addresses and users end up as ssh arguments: a leading "-" would be read as an option.
_ADDRESS_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$|^\[[0-9A-Fa-f:]+\]$|^[0-9A-Fa-f:]+$")
_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
DEFAULT_ROOT = ".clustertune"  # relative to the login directory on the host


def login_relative(root: str, address: str) -> str:
    """A host's root as every command and rsync use it, quoted, so that no shell on the host
    expands it: ``~`` and ``~/X`` (the login directory, where ssh starts) as ``.`` and ``X``.
    A root that needs the host's shell (another user's home, a variable) is refused."""
    if root == "~" or root.startswith("~/"):
        return root[2:].strip("/") or "."
    if root.startswith("~"):
        user, _, rest = root[1:].partition("/")
        raise ClusterError(f"remote root {root!r} of host {address}: '~{user}' (another user's home) is not expanded "
                           f"on the host; give the absolute path, e.g. /home/{user}/{rest or 'ct'}")
    if "$" in root or "`" in root:
        raise ClusterError(f"remote root {root!r} of host {address}: variables are not expanded on the host (every "
                           "path is quoted); give the path itself, absolute (/scratch/me/ct) or relative to the login "
                           "directory (ct)")
    return root


def clusters_file() -> Path:
    return config_dir() / "clusters.yaml"


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class HostSpec:
    """One SSH host of a cluster (a dataclass whose field types pydantic checks; the rules a
    type cannot say are checked after)."""

    address: StrictStr
    """Host name or IP (or an alias from ~/.ssh/config)."""
    user: StrictStr | None = None
    """Login user (default: ssh's choice, e.g. from ~/.ssh/config)."""
    port: StrictInt | None = None
    """SSH port (default: ssh's choice)."""
    key: StrictStr | None = None
    """Identity file (default: ssh's keys and agent)."""
    jump: StrictStr | None = None
    """Jump host, as for ``ssh -J``."""
    root: StrictStr = DEFAULT_ROOT
    """Directory for clustertune's files on the host (envs, code snapshots, runs); relative
    paths are under the login directory, and so is ``~/X`` (kept as ``X``)."""
    known_hosts: StrictStr | None = None
    """known_hosts file to verify the host key against (default: ssh's own)."""
    python: StrictStr = "python3"
    """The host's Python, used to run clustertune's helper and to create envs."""

    def __post_init__(self) -> None:
        if not self.address or not _ADDRESS_RE.match(self.address):
            raise ClusterError(f"host address {self.address!r} is not a host name or IP address "
                               "(letters, digits, '.', '-', '_'; it may not start with '-')")
        if self.user is not None and not _USER_RE.match(self.user):
            raise ClusterError(f"user {self.user!r} of host {self.address} is not a valid login name")
        if self.port is not None and not (isinstance(self.port, int) and 0 < self.port < 65536):
            raise ClusterError(f"port {self.port!r} of host {self.address} is not a TCP port (1-65535)")
        if self.jump is not None:
            self.jump_hops()  # raises on a hop that is not [user@]host[:port]
        if not self.python or self.python.startswith("-") or "\n" in self.python:
            raise ClusterError(f"python {self.python!r} of host {self.address} is not a command or path")
        if not self.root or "\n" in self.root or "\x00" in self.root:
            raise ClusterError(f"remote root {self.root!r} of host {self.address} is not a usable path")
        # Frozen: the one field kept in another spelling (same place), before anything uses it.
        object.__setattr__(self, "root", login_relative(self.root, self.address))

    def jump_hops(self) -> list[HostSpec]:
        """The jump hosts, first hop first (``jump`` is ``[user@]host[:port]``, comma-separated
        for a chain, as for ``ssh -J``). Each becomes an ssh argument, so each is validated."""
        if self.jump is None:
            return []
        hops = []
        for text in self.jump.split(","):
            try:
                if not text or text.startswith("-") or any(c.isspace() for c in text):
                    raise ClusterError("empty, or starts with '-', or holds a space")
                hops.append(HostSpec.parse(text))
            except ClusterError as exc:
                raise ClusterError(f"jump host {text!r} of host {self.address} is not a [user@]host[:port] "
                                   f"({exc}); write it as for `ssh -J`, e.g. admin@bastion.example.org:2222") from None
        return hops

    @property
    def label(self) -> str:
        text = f"{self.user}@{self.address}" if self.user else self.address
        return f"{text}:{self.port}" if self.port else text

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def parse(cls, text: str, **defaults: Any) -> HostSpec:
        """``[user@]address[:port]`` plus defaults for the other fields."""
        user = defaults.pop("user", None)
        port = defaults.pop("port", None)
        rest = text
        if "@" in rest:
            user, rest = rest.split("@", 1)
            if not user:
                raise ClusterError(f"host {text!r}: no user before '@'; write user@host, or just host")
        if rest.count(":") == 1:
            rest, port_text = rest.split(":")
            try:
                port = int(port_text)
            except ValueError:
                raise ClusterError(f"host {text!r}: port {port_text!r} is not a number") from None
        return cls(address=rest, user=user or None, port=port, **{k: v for k, v in defaults.items() if v is not None})


@dataclass(frozen=True, config=ConfigDict(arbitrary_types_allowed=True))
class ClusterSpec:
    name: str
    hosts: tuple[HostSpec, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": [h.to_dict() for h in self.hosts]}


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ClusterError(f"cluster name {name!r} is not valid: use letters, digits, '.', '-', '_' "
                           "(up to 64, not starting with '-' or '.')")
    return name


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(path, text, mode=0o600)


class _ClusterEntry(BaseModel):
    """One cluster as ``clusters.yaml`` keeps it."""

    model_config = ConfigDict(extra="forbid")
    hosts: list[HostSpec] = Field(min_length=1)


_ENTRY = TypeAdapter(_ClusterEntry)


def _load_all() -> dict[str, Any]:
    path = clusters_file()
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ClusterError(f"{path}: not valid YAML ({exc}); fix or delete the file") from None
    except UnicodeDecodeError as exc:
        raise ClusterError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); fix or delete the file") from None
    clusters = data.get("clusters", {}) if isinstance(data, dict) else None
    if not isinstance(clusters, dict):
        raise ClusterError(f"{path}: expected a mapping 'clusters: {{NAME: {{hosts: [...]}}}}'")
    return clusters


def gpu_memory_overrides() -> dict[str, float]:
    """``gpu_memory_gb`` in ``clusters.yaml``: a site's own GPU type names (as its GRES or its
    ``nvidia-smi`` names them) and their memory in GB, beside the table clustertune ships, e.g.
    ``gpu_memory_gb: {a100-80g: 80, rtx6000ada: 48}``."""
    path = clusters_file()
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError):
        return {}  # the clusters' own loader says what is wrong with the file
    table = data.get("gpu_memory_gb", {}) if isinstance(data, dict) else {}
    if not isinstance(table, dict):
        raise ClusterError(f"{path}: gpu_memory_gb must be a mapping of GPU type to GB, e.g. 'gpu_memory_gb: {{l40s: 48}}'")
    bad = [f"{k}: {v!r}" for k, v in table.items()
           if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0]
    if bad:
        raise ClusterError(f"{path}: gpu_memory_gb: {', '.join(bad)}: each GPU type needs its memory in GB, a "
                           "positive number (e.g. 'l40s: 48')")
    return {str(k).lower(): float(v) for k, v in table.items()}


def _parse_cluster(name: str, raw: Any) -> ClusterSpec:
    """One cluster's entry, through its typed model; the error names the key in the file."""
    try:
        entry = _ENTRY.validate_python(raw)
    except ValidationError as exc:
        raise ClusterError(f"{clusters_file()}: {_problem(name, exc)}") from None
    except ClusterError as exc:  # a rule the types cannot say (a port out of range, an address starting with '-')
        raise ClusterError(f"{clusters_file()}: clusters.{name}: {exc}") from None
    return ClusterSpec(name, tuple(entry.hosts))


def _problem(name: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = list(err["loc"])
    where = f"clusters.{name}" + "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in loc)
    known = sorted(HostSpec.__dataclass_fields__)
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        if len(loc) == 1:
            return f"{where}: unknown key (a cluster has only 'hosts')"
        return f"{where}: unknown key (a host knows {known})"
    if loc == ["hosts"]:
        return f"clusters.{name}.hosts must be a non-empty list of hosts, each a mapping with an 'address'"
    if not loc:
        return f"clusters.{name} must be a mapping with 'hosts'"
    if err["type"] in ("model_type", "dict_type", "dataclass_type", "model_attributes_type"):
        return f"{where} must be a mapping with an 'address'"
    return f"{where}: {err['msg']}"


def list_clusters() -> list[ClusterSpec]:
    return [_parse_cluster(n, raw) for n, raw in sorted(_load_all().items())]


def get_cluster(name: str) -> ClusterSpec:
    clusters = _load_all()
    if name not in clusters:
        known = ", ".join(sorted(clusters)) or "none yet"
        raise ClusterError(f"no cluster {name!r} in {clusters_file()} (known: {known}); "
                           f"add it with `clustertune cluster add {name} HOST...`")
    return _parse_cluster(name, clusters[name])


def add_cluster(name: str, hosts: list[HostSpec], replace: bool = True) -> ClusterSpec:
    check_name(name)
    if not hosts:
        raise ClusterError(f"cluster {name!r} needs at least one host")
    clusters = _load_all()
    if name in clusters and not replace:
        raise ClusterError(f"cluster {name!r} exists already; remove it first or pass --replace")
    spec = ClusterSpec(name, tuple(hosts))
    clusters[name] = spec.to_dict()
    _write_private(clusters_file(), yaml.safe_dump({"clusters": clusters}, sort_keys=True))
    return spec


def remove_cluster(name: str) -> None:
    clusters = _load_all()
    if name not in clusters:
        raise ClusterError(f"no cluster {name!r} in {clusters_file()}")
    del clusters[name]
    _write_private(clusters_file(), yaml.safe_dump({"clusters": clusters}, sort_keys=True))


# -- client identity -----------------------------------------------------------------------


def run_secret(run_key: str) -> str:
    """The key that the remote process of ``run_key`` signs its result with."""
    return hmac.new(identity_key(), b"run-result:" + run_key.encode(), hashlib.sha256).hexdigest()


def client_id() -> str:
    """A public name for this client's identity (recorded in run.json)."""
    return hashlib.sha256(b"client-id:" + identity_key()).hexdigest()[:16]
