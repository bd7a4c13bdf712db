"""The trackers a recipe asks for (``tracking.trackers``) are installed where it is checked:
``validate`` and the start of a run refuse a missing one with the command that installs it, before
anything is submitted (the nodes' own install is the cluster preflight's to ask)."""

from __future__ import annotations

import importlib.util

from clustertune.errors import TrackingError
from clustertune.extras import install_hint

# Tracker name (as Accelerate spells it) -> the package that must be importable.
TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def check_trackers(trackers: list[str]) -> None:
    missing = [t for t in trackers if importlib.util.find_spec(TRACKER_PACKAGES[t]) is None]
    if missing:
        raise TrackingError(
            f"tracking.trackers: {', '.join(missing)} asked for but not installed; "
            f"`{install_hint(*missing)}` or remove it from the recipe"
        )
