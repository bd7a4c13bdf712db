"""``cloud setup``: SkyPilot in an environment of its own (``cluster up`` uses it)."""

from __future__ import annotations

import os
import sys

import typer

from clustertune import api

cloud_app = typer.Typer(help="GPUs on demand from a cloud, through SkyPilot.", no_args_is_help=True)


@cloud_app.command("setup")
def cloud_setup() -> None:
    """Install SkyPilot into an environment of its own (once; cached by its pinned version)."""
    sky_env = api.clusters.sky_env
    where = f"${sky_env.PYTHON_ENV}" if os.environ.get(sky_env.PYTHON_ENV) else str(sky_env.venv_dir())
    print(f"setting up SkyPilot ({sky_env.pinned()}) in {where} ...", file=sys.stderr)
    python = sky_env.setup()
    info = api.clusters.bridge({"op": "version"}, python=python)
    print(f"SkyPilot {info['version']} ready: {info['python']}\n"
          f"next: `{python.with_name('sky')} check` enables a cloud with your credentials")
