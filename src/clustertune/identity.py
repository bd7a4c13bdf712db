"""The client's identity key and the keys derived from it.

``$CLUSTERTUNE_CONFIG_DIR`` (default ``$XDG_CONFIG_HOME/clustertune`` or
``~/.config/clustertune``) holds ``identity.key``: 32 random bytes, created once (mode 0600,
complete before it appears) and never sent anywhere. What travels are keys derived from it:

- per remote call, the key its result is signed with (``clustertune.remote.config.run_secret``);
- the checkpoint key, which signs every checkpoint this user's runs write and is checked before
  any checkpoint is loaded. Training processes on other machines (SSH hosts, SLURM nodes) get it
  in their environment as ``CLUSTERTUNE_CHECKPOINT_KEY``, the way ``launch.env_passthrough``
  values travel: never in argv, a job script or the run directory. Processes on this machine
  derive it themselves.

This module sits at the bottom of the layers: the node side (train) checks checkpoints with it,
the remote side signs call results with it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from clustertune.errors import CheckpointError, ClusterError

CHECKPOINT_KEY_ENV = "CLUSTERTUNE_CHECKPOINT_KEY"
IDENTITY_FILE = "identity.key"


def config_dir() -> Path:
    env = os.environ.get("CLUSTERTUNE_CONFIG_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".config") / "clustertune"


def identity_file() -> Path:
    return config_dir() / IDENTITY_FILE


def identity_key() -> bytes:
    """This client's secret (created on first use, mode 0600). It never leaves this machine:
    remote processes only get keys derived from it."""
    path = identity_file()
    if not path.is_file():
        new_identity(path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise ClusterError(f"{path} is readable by others (mode {mode:o}); `chmod 600 {path}`")
    try:
        return bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise ClusterError(f"{path} is not a clustertune identity key; delete it to create a new one") from None


def new_identity(path: Path) -> None:
    """A new identity key at ``path`` (mode 0600), unless one is there: concurrent first uses
    share one key."""
    create_once(path, secrets.token_hex(32) + "\n")


def create_once(path: Path, text: str) -> None:
    """Write ``path`` (mode 0600) unless it exists: the complete file is linked into place,
    which fails when another process got there first, so concurrent first uses share one key."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process created it first: use theirs
    finally:
        tmp.unlink(missing_ok=True)


def derived_checkpoint_key() -> bytes:
    """The checkpoint key of this machine's identity (what a launcher gives its remote nodes)."""
    return hmac.new(identity_key(), b"checkpoint-signing", hashlib.sha256).digest()


def checkpoint_key() -> bytes:
    """The key this process signs and checks checkpoints with: the one its launcher gave it
    (``$CLUSTERTUNE_CHECKPOINT_KEY``), else this machine's identity's."""
    given = os.environ.get(CHECKPOINT_KEY_ENV)
    if not given:
        return derived_checkpoint_key()
    try:
        key = bytes.fromhex(given.strip())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise CheckpointError(f"${CHECKPOINT_KEY_ENV} is not a checkpoint key (64 hex digits); unset it to use "
                              f"the key of {identity_file()}")
    return key


def key_id(key: bytes) -> str:
    """A public name for a checkpoint key (recorded beside each signature, shown in messages)."""
    return hashlib.sha256(b"checkpoint-key-id:" + key).hexdigest()[:16]
