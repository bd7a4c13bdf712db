"""A model's class checks its own config (a width its heads do not divide, a zero size) when it
is built: the preflight builds it on the meta device, where that costs no memory. What costs is
the import of its modeling code (transformers pulls in torch's compiler and DTensor with it:
about 2 s of a 3 s start on a 2-core machine), in the launching process, before any rank starts.

So checks that passed are remembered, as marker files named by a digest of everything they
depend on, at two levels:

- a config that built (``meta_build_error``): the config as JSON, the head, the transformers
  and torch versions. Another recipe that resolves to the same config builds nothing.
- the recipe's whole model check (``ModelChecks``): resolving the config with its overrides, the
  sequence length against its positions, the meta build and the adapter. Its key is read without
  transformers (the recipe's model section, the head, the sequence length, the bytes of the
  config files it names, the versions of the libraries the checks use), so the next check of the
  same model (a rerun, a resume, a sweep's trials, the next launch) imports neither transformers
  nor torch: about 1.5 s of the launching process's 2 s before torchrun starts.

Only successes are remembered, so a model that fails is checked, and its error told, every time; a
model whose code ships with it (``trust_remote_code``) is checked every time too, since that code
can change under the same config.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from clustertune.extras import installed_version
from clustertune.fsutil import atomic_write_text, digest, file_digest
from clustertune.models.heads import auto_class
from clustertune.recipe.schema import Recipe

log = logging.getLogger("clustertune")

# The folder of remembered builds under the data cache root: hidden, so the cache's listing and
# gc, which look for prepared entries, never see it.
MODEL_CHECKS = ".model-checks"


def build_key(config: Any, head: str) -> str:
    """What a meta build of ``config`` under ``head`` depends on, as a digest."""
    return digest({"config": config.to_json_string(use_diff=False), "head": head,
                   "transformers": installed_version("transformers"), "torch": installed_version("torch")}, n=32)


def meta_build_error(config: Any, head: str, trust_remote_code: bool, known_good: Path) -> Exception | None:
    """What building the ``head`` model of ``config`` on the meta device raises (None: it builds).
    ``known_good`` is the folder of remembered successes."""
    marker = None if trust_remote_code else known_good / f"{build_key(config, head)}.ok"
    if marker is not None and marker.is_file():
        return None
    # Deferred: torch and the model's code, for configs not built before.
    import torch

    try:
        with torch.device("meta"):
            auto_class(head).from_config(config, **({"trust_remote_code": True} if trust_remote_code else {}))
    except Exception as exc:  # the model class's own checks: ValueError, AssertionError, ZeroDivisionError...
        return exc
    if marker is not None:
        _remember(marker, f"{config.model_type} {head}\n")
    return None


# The libraries whose behaviour the model checks depend on: the config classes and model code,
# the meta device, PEFT's wrapping, bitsandbytes' presence for QLoRA.
_CHECKED_WITH = ("transformers", "torch", "peft", "bitsandbytes")


class ModelChecks:
    """The remembered outcome of one recipe's model checks: ``passed`` (checked before, with the
    same inputs), else check and ``remember()`` once they all passed."""

    def __init__(self, recipe: Recipe, known_good: Path) -> None:
        m = recipe.model
        self.marker = None if m.trust_remote_code else known_good / f"checks-{_checks_key(recipe)}.ok"

    @property
    def passed(self) -> bool:
        return self.marker is not None and self.marker.is_file()

    def remember(self) -> None:
        if self.marker is not None:
            _remember(self.marker, "model checks passed\n")


def _checks_key(recipe: Recipe) -> str:
    m = recipe.model
    files: dict[str, str | None] = {}
    for ref in (m.config, m.name_or_path):
        p = Path(ref).expanduser() if ref else None
        if p is not None and p.is_dir():
            p = p / "config.json"
        if p is not None and p.is_file():  # what the config is read from, by content
            files[str(p)] = file_digest(p)
    return digest({"model": m.model_dump(mode="json"), "head": recipe.traits.head,
                   "sequence": [recipe.sequence_key, recipe.sequence_length], "files": files,
                   "versions": {pkg: _importable_version(pkg) for pkg in _CHECKED_WITH}}, n=32)


def _importable_version(pkg: str) -> str | None:
    """``pkg``'s installed version where it can be imported here (found without importing it)."""
    return installed_version(pkg) if importlib.util.find_spec(pkg) is not None else None


def _remember(marker: Path, text: str) -> None:
    try:
        # Not parents=True: a cache root that is not there (a cluster's path named in the
        # recipe) is not made here; the check is just not remembered.
        marker.parent.mkdir(exist_ok=True)
        atomic_write_text(marker, text)
    except OSError as exc:  # no cache root here, a read-only or full one: the next check runs again
        log.debug("model check not remembered in %s: %s", marker.parent, exc)
