"""``cloud setup`` and ``cluster up``: machines from a cloud, through SkyPilot."""

from __future__ import annotations

import sys
from typing import Optional

import typer

cloud_app = typer.Typer(help="GPUs on demand from a cloud, through SkyPilot.", no_args_is_help=True)


def _progress(line: str) -> None:
    sys.stderr.write(line if line.endswith("\n") else line + "\n")
    sys.stderr.flush()


@cloud_app.command("setup")
def cloud_setup() -> None:
    """Install SkyPilot into an environment of its own (once; cached by its pinned version)."""
    from clustertune.remote import sky_env
    from clustertune.remote.cloud import bridge

    print(f"setting up SkyPilot ({sky_env.pinned()}) in {sky_env.venv_dir()} ...", file=sys.stderr)
    python = sky_env.setup()
    info = bridge({"op": "version"}, python=python)
    print(f"SkyPilot {info['version']} ready: {info['python']}\n"
          f"next: `{python.with_name('sky')} check` enables a cloud with your credentials")


def cluster_up(
    name: str = typer.Argument(..., help="Cluster name (as for every clustertune cluster)."),
    gpus: str = typer.Option(..., "--gpus", help="GPUs per node, NAME:COUNT (e.g. A10G:1, H100:8)."),
    infra: Optional[str] = typer.Option(None, "--infra", help="Cloud, optionally /region (e.g. aws, gcp/us-central1)."),
    nodes: int = typer.Option(1, "--nodes", help="Number of machines."),
    spot: bool = typer.Option(False, "--spot", help="Spot instances (cheaper; can be preempted)."),
    autostop: Optional[str] = typer.Option(None, "--autostop",
                                           help="Stop the machines after this much idle time (e.g. 30m, 2h)."),
) -> None:
    """Start machines on a cloud (or reuse them) and register them as an SSH cluster."""
    from clustertune.remote.cloud import CloudSpec, parse_autostop, up

    spec = CloudSpec(gpus=gpus, infra=infra, nodes=nodes, spot=spot)
    record, fingerprints = up(name, spec, parse_autostop(autostop), on_progress=_progress)
    print(f"cluster {name}: {len(record['nodes'])} host(s) on {record.get('cloud')} {record.get('region') or ''}, "
          f"{record.get('accelerators')}")
    print("host keys pinned (trust on first use; checked strictly from now on):")
    for line in fingerprints:
        print(f"  {line}")
    print(f"next: `clustertune exec {name} -- nvidia-smi`, or a recipe with launch.backend=ssh launch.cluster={name}")
