"""A model's class checks its own config (a width its heads do not divide, a zero size) when it
is built: the preflight builds it on the meta device, where that costs no memory. What costs is
the import of its modeling code (transformers pulls in torch's compiler and DTensor with it:
about 2 s of a 3 s start on a 2-core machine), in the launching process, before any rank starts.

So a config that built once is remembered: a marker file named by a digest of everything the
build depends on (the config as JSON, the head, the transformers and torch versions). The next
check of the same model (a rerun, a resume, a sweep's trials, the next launch) finds the marker
and imports nothing. Only successes are remembered, so a config that fails is built, and its
error told, every time; a model whose code ships with it (``trust_remote_code``) is built every
time too, since that code can change under the same config.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from clustertune.extras import installed_version
from clustertune.fsutil import atomic_write_text, digest
from clustertune.models.heads import auto_class

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
        try:
            # Not parents=True: a cache root that is not there (a cluster's path named in the
            # recipe) is not made here; the build is just not remembered.
            marker.parent.mkdir(exist_ok=True)
            atomic_write_text(marker, f"{config.model_type} {head}\n")
        except OSError as exc:  # no cache root here, a read-only or full one: the next check builds again
            log.debug("model check not remembered in %s: %s", known_good, exc)
    return None
