"""``cluster add|ls|show|check|down|gc|rm``, ``sync`` and ``exec``: clusters from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from clustertune import api
from clustertune.errors import ClusterError


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*header, box=None)
    for row in rows:
        table.add_row(*row)
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)


cluster_app = typer.Typer(help="SSH clusters: add, list, check, stop, clean up; `up` starts one on a cloud.", no_args_is_help=True)

@cluster_app.command("add")
def cluster_add(
    name: str = typer.Argument(..., help="Cluster name."),
    hosts: List[str] = typer.Argument(..., help="Hosts as [user@]address[:port] (or ~/.ssh/config aliases)."),
    user: Optional[str] = typer.Option(None, "--user", help="Login user for hosts that do not name one."),
    key: Optional[Path] = typer.Option(None, "--key", help="SSH identity file."),
    port: Optional[int] = typer.Option(None, "--port", help="SSH port for hosts that do not name one."),
    jump: Optional[str] = typer.Option(None, "--jump", help="Jump host ([user@]host[:port]), as ssh -J."),
    root: Optional[str] = typer.Option(None, "--root", help="clustertune's directory on each host (default ~/.clustertune)."),
    known_hosts: Optional[Path] = typer.Option(None, "--known-hosts", help="known_hosts file to verify host keys against."),
    python: Optional[str] = typer.Option(None, "--python", help="The hosts' Python (default python3)."),
) -> None:
    """Add (or replace) a cluster in the user config file."""
    for option, given in (("--key", key), ("--known-hosts", known_hosts)):
        if given is not None and not given.expanduser().is_file():
            raise ClusterError(f"{option} {given}: no such file; give the path of an existing file (nothing was saved)")
    specs = [api.clusters.HostSpec.parse(h, user=user, port=port, key=str(key.expanduser().resolve()) if key else None,
                            jump=jump, root=root, known_hosts=str(known_hosts.expanduser().resolve()) if known_hosts else None,
                            python=python) for h in hosts]
    labels = [s.label for s in specs]
    twice = sorted({lb for lb in labels if labels.count(lb) > 1})
    if twice:  # one root for all: two nodes on one host would share their run and env folders
        raise ClusterError(f"host {twice[0]} is given twice; name each host once (nothing was saved)")
    spec = api.clusters.add_cluster(name, specs)
    print(f"cluster {spec.name}: {len(spec.hosts)} host(s) saved in {api.clusters.clusters_file()}; "
          f"`clustertune cluster check {spec.name}` tries them")

@cluster_app.command("ls")
def cluster_ls() -> None:
    """List clusters and their hosts (cloud clusters with their GPUs, price and autostop)."""
    found = api.clusters.list_clusters()
    if not found:
        print("no clusters yet; `clustertune cluster add NAME HOST...` or `clustertune cluster up NAME --gpus A10G:1`")
        return
    clouds = api.clusters.cloud_clusters()

    def cloud_cols(name: str) -> list[str]:
        m = clouds.get(name)
        if m is None:
            return ["-", "-", "-", "-"]
        price = f"${m['hourly_price']:.2f}/h" if m.get("hourly_price") is not None else "?"
        stop = f"{m['autostop_minutes']}m" if (m.get("autostop_minutes") or -1) > 0 else "off"
        return [m.get("cloud") or "?", m.get("accelerators") or m["spec"]["gpus"], price, stop]

    _print_table(["cluster", "host", "root", "key", "jump", "cloud", "gpus", "price", "autostop"],
                 [[c.name, h.label, h.root, h.key or "-", h.jump or "-", *cloud_cols(c.name)]
                  for c in found for h in c.hosts])

@cluster_app.command("up")
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
    spec = api.clusters.CloudSpec(gpus=gpus, infra=infra, nodes=nodes, spot=spot)
    record, fingerprints = api.clusters.up(name, spec, api.clusters.parse_autostop(autostop), on_progress=lambda line: print(line, end="" if line.endswith("\n") else "\n", file=sys.stderr))
    print(f"cluster {name}: {len(record['nodes'])} host(s) on {record.get('cloud')} {record.get('region') or ''}, "
          f"{record.get('accelerators')}")
    print("host keys pinned (trust on first use; checked strictly from now on):")
    for line in fingerprints:
        print(f"  {line}")
    print(f"next: `clustertune exec {name} -- nvidia-smi`, or a recipe with launch.backend=ssh launch.cluster={name}")

@cluster_app.command("check")
def cluster_check(
    name: str = typer.Argument(..., help="Cluster name."),
    accept_new_host_keys: bool = typer.Option(False, "--accept-new-host-keys",
                                              help="Trust hosts whose key is not known yet (never a changed key)."),
) -> None:
    """Reachable? Python version, GPUs and memory, free disk, envs present, per host."""
    rows = api.clusters.Cluster.named(name, accept_new_host_keys).check()
    bad = [r for r in rows if not r.get("ok")]
    table = []
    for r in rows:
        if not r.get("ok"):
            table.append([r["host"], "NO", "-", "-", "-", "-"])
            continue
        gpus = ", ".join(f"{g['name']} {(g['memory_mib'] or 0) // 1024} GiB" for g in r["gpus"]) or "none"
        table.append([r["host"], "yes", r["python"], gpus, f"{r['free_disk_gib']} GiB", str(len(r["envs"]))])
    _print_table(["host", "reachable", "python", "gpus", "free disk", "envs"], table)
    if bad:
        raise ClusterError("\n".join(r["error"] for r in bad))

@cluster_app.command("show")
def cluster_show(
    name: str = typer.Argument(..., help="`slurm` (the SLURM cluster this machine submits to) or an SSH cluster's name."),
    as_json: bool = typer.Option(False, "--json", help="The same facts as JSON."),
    refresh: bool = typer.Option(False, "--refresh", help="SLURM: probe each partition's node again (kept a day)."),
) -> None:
    """What a cluster offers a run: partitions or hosts, GPUs and their memory, limits, a compute
    node's environment, and the largest model each shipped recipe's way of training fits there."""
    facts = api.cluster_show.show_slurm(refresh) if name == "slurm" else api.cluster_show.show_ssh(name)
    if as_json:
        print(json.dumps(facts, indent=2, default=str))
        return
    places: list[str]
    if facts["backend"] == "slurm":
        print(f"SLURM cluster {facts['cluster']} ({facts['version']})")
        rows = []
        for p in facts["partitions"]:
            env = p["environment"] or {}
            gpus = ", ".join(f"{n} x {k}" for k, n in p["gpus_per_node"].items()) or "none"
            mem = f"{p['gpu_memory_gib']} GiB" if p["gpu_memory_gib"] else "-"
            rows.append([p["partition"] + ("*" if p["default"] else ""), str(p["nodes"]), p["state"],
                         "none" if p["max_time_min"] is None else f"{p['max_time_min']} min",
                         str(p["max_nodes"] or "-"), gpus, mem,
                         f"Python {env['python']}, torch {env['torch']}" if env else "not probed"])
        _print_table(["partition", "nodes", "state", "max time", "max nodes", "gpus per node", "gpu memory",
                      "environment"], rows)
        places = [p["partition"] for p in facts["partitions"]]
    else:
        print(f"SSH cluster {facts['cluster']}")
        rows = []
        for h in facts["hosts"]:
            gpus = ", ".join(f"{g['name']} {(g['memory_mib'] or 0) // 1024} GiB" for g in h.get("gpus") or []) or "none"
            rows.append([h["host"], h.get("python", "-"), gpus, f"{h.get('free_disk_gib', '-')} GiB"]
                        if h.get("ok") else [h["host"], "unreachable", "-", "-"])
        _print_table(["host", "python", "gpus", "free disk"], rows)
        places = [h["host"] for h in facts["hosts"]]
    print("\nlargest Llama-shaped model that fits one GPU (the estimator, ~90% of its memory), per way of training:")
    _print_table(["shipped recipes", "strategy", "precision", "batch x seq", *places],
                 [[", ".join(r["recipes"]), r["strategy"], r["precision"], f"{r['batch_size']} x {r['sequence_length']}",
                   *(r[p] or "-" for p in places)] for r in facts["fits"]])


@cluster_app.command("down")
def cluster_down(
    name: str = typer.Argument(..., help="Cluster name."),
    force: bool = typer.Option(False, "--force", help="Cloud clusters: tear down even with runs active or results kept there."),
) -> None:
    """Stop everything clustertune started on the cluster's hosts; a cloud cluster's machines
    are then torn down (refused while runs are active or keep their results there)."""
    if api.clusters.is_cloud(name):
        api.clusters.down_cloud(name, force=force, on_progress=lambda line: print(line, end="", file=sys.stderr))
        print(f"cloud cluster {name}: torn down and forgotten")
        return
    for r in api.clusters.Cluster.named(name).down():
        print(f"{r['host']}: stopped {len(r['stopped'])} run(s)" + (f": {', '.join(r['stopped'])}" if r["stopped"] else ""))

@cluster_app.command("gc")
def cluster_gc(
    name: str = typer.Argument(..., help="Cluster name."),
    older_than_days: float = typer.Option(7.0, "--older-than-days", help="Remove what is older than this."),
) -> None:
    """Remove finished runs, code snapshots and envs older than the limit from the hosts."""
    for r in api.clusters.Cluster.named(name).gc(older_than_days):
        print(f"{r['host']}: removed {len(r['removed'])}" + "".join(f"\n  {p}" for p in r["removed"]))

@cluster_app.command("rm")
def cluster_rm(name: str = typer.Argument(..., help="Cluster name.")) -> None:
    """Forget a cluster (nothing on its hosts is touched)."""
    api.clusters.remove_cluster(name)
    print(f"cluster {name} removed")


def sync(
    name: str = typer.Argument(..., help="Cluster name."),
    local: Path = typer.Argument(Path("."), help="Local folder (default: the current one)."),
    remote: Optional[str] = typer.Argument(None, help="Remote folder; relative paths are under each host's root."),
) -> None:
    """rsync a folder to every host of a cluster (respecting .gitignore)."""
    c = api.clusters.Cluster.named(name)
    for host, dest in zip(c.hosts, c.sync(local, remote)):
        print(f"{host.label}: {dest}")

def exec_(
    name: str = typer.Argument(..., help="Cluster name."),
    command: List[str] = typer.Argument(..., help="The command and its arguments (after `--`)."),
    host: Optional[List[str]] = typer.Option(None, "--host", help="Only this host (index or address); repeatable."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="A requirement of the env to run in; repeatable."),
    cd: Optional[str] = typer.Option(None, "--cd", help="Remote working directory (relative: under the host's root)."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Local folder sent as a snapshot and used as the working directory."),
    detach: bool = typer.Option(False, "--detach", help="Print the run id and return; `clustertune logs ID -f` follows."),
    gpus: int = typer.Option(0, "--gpus", help="Free GPUs to give the command on each host (CUDA_VISIBLE_DEVICES)."),
    site_packages_from: Optional[str] = typer.Option(
        None, "--site-packages-from", help="A Python on the hosts whose installed packages the env reuses (an existing torch)."),
) -> None:
    """Run a command on the cluster's hosts, env activated, as a run with an id and logs.
    On hosts without a GPU, torch in --env comes from PyTorch's CPU wheels."""
    command = list(command)
    if command and command[0] == "--":  # click keeps the separator when options stop at NAME
        command = command[1:]
    if workdir is not None and not workdir.is_dir():  # before any host is asked
        raise ClusterError(f"--workdir {workdir}: not a folder; give the local folder to send as the working directory")
    c = api.clusters.Cluster.named(name)
    nodes = [c.host_index(int(h) if h.isdigit() else h) for h in host] if host else None
    run, answers = api.clusters.remote_exec(c, list(command), hosts=nodes, env=api.clusters.Env(requirements=tuple(env or ()), site_packages_from=site_packages_from),
                               workdir=workdir.resolve() if workdir else None, cwd=cd, wait=not detach, stream=not detach,
                               gpus=gpus)
    print(f"run {run.id}", file=sys.stderr)
    if detach:
        print(run.id)
        return
    codes = [head.get("exit_code") for head, _ in answers.values()]
    bad = next((c for c in codes if c not in (0, None)), 0 if all(c == 0 for c in codes) else 1)
    if bad:
        sys.exit(int(bad))  # the remote command's own exit code
