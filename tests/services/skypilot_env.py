"""SkyPilot's own environment, built once and cached by a hash of its pinned requirements.

The first test session on a machine installs SkyPilot into ``~/.cache/clustertune/skypilot/
<hash>`` (``$CLUSTERTUNE_SKY_VENVS`` moves it; ``$CLUSTERTUNE_SKY_PYTHON`` uses a SkyPilot the
user installed instead); later sessions reuse it. Without the package index the tests that
need it skip, unless CLUSTERTUNE_REQUIRE_SERVICES=1 (CI), where they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def sky_python() -> Path:
    from clustertune.errors import ClusterError
    from clustertune.remote import sky_env

    try:
        return sky_env.setup()
    except ClusterError as exc:
        if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1":
            pytest.fail(f"SkyPilot's environment could not be built: {exc}", pytrace=False)
        pytest.skip(f"SkyPilot's environment could not be built ({exc}); `clustertune cloud setup` builds it")
