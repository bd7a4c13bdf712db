"""Multi-host launch over a real sshd: the run directory goes to both hosts, one torchrun per
host meets at a c10d rendezvous on the first, gloo all_reduce across the hosts, rank 0's output
comes back to the local run directory, and the run id works with status and logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import clustertune as ct
from clustertune.remote.envs import Env
from clustertune.remote.train import NodeSpec, default_node_command, finish_training, launch_training
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import runs_root
from tests.conftest import cli

NODE_SCRIPT = """
import json, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank} of {world} node {os.environ['GROUP_RANK']} sum {t.item()}", flush=True)
if rank == 0:
    os.makedirs("model", exist_ok=True)
    with open("model/allreduce.json", "w") as fh:
        json.dump({"sum": t.item(), "world": world, "cwd": os.getcwd()}, fh)
dist.destroy_process_group()
"""


def test_two_host_torchrun_with_c10d_rendezvous(ssh_cluster):
    run = Run.create(runs_root(), "ddp", "causal_lm", "name: ddp\n", ["test"])
    (run.paths.root / "allreduce.py").write_text(NODE_SCRIPT)

    def node_command(node: NodeSpec) -> list[str]:
        argv = default_node_command(node)
        assert argv[-3:] == ["-m", "clustertune.train.entry", node.run_dir]
        return argv[:-3] + ["allreduce.py"]  # the same launcher, a tiny node program

    # The hosts reuse this interpreter's packages (torch) instead of installing them again.
    job = launch_training(run, ct.cluster("loop"), Env(site_packages_from=sys.executable), node_command=node_command)
    assert finish_training(job, timeout=300) is RunState.COMPLETED, job.logs()
    out = json.loads((run.paths.root / "model" / "allreduce.json").read_text())
    assert out["sum"] == 3.0 and out["world"] == 2
    # Written on a host (c10d gives rank 0 to whichever joined first), brought back here.
    assert any(out["cwd"].startswith(h.root) for h in ssh_cluster.hosts)
    logs = cli("logs", run.id).stdout
    assert "rank 0 of 2" in logs and "rank 1 of 2" in logs and logs.count("sum 3.0") == 2
    assert logs.count("[node 0] rank") == 1 and logs.count("[node 1] rank") == 1  # one process per host
    assert "COMPLETED" in cli("status", run.id).stdout
    for h in ssh_cluster.hosts:  # each host got the run directory
        assert (Path(h.root) / "train" / run.id / "recipe.yaml").read_text() == "name: ddp\n"


def test_two_host_cpu_training_brings_results_back(ssh_cluster):
    import yaml

    from tests.conftest import TINY_CAUSAL, with_

    from clustertune.launch.submit import prepare_run_data
    from clustertune.recipe.load import load_recipe

    recipe = with_(TINY_CAUSAL, train={"max_steps": 4, "log_every": 2, "eval_at_start": False})
    run = Run.create(runs_root(), "tiny", "causal_lm", yaml.safe_dump(recipe), ["test"])
    # Prepared here, once; the loopback hosts read it where the data cache put it (one filesystem).
    prepare_run_data(load_recipe(recipe), run.paths)
    job = launch_training(run, ct.cluster("loop"), Env(site_packages_from=sys.executable))
    assert finish_training(job, timeout=420) is RunState.COMPLETED, job.logs()
    summary = json.loads(run.paths.summary.read_text())
    assert summary["steps"] == 4
    assert (run.paths.model / "config.json").is_file()  # the final model, written by rank 0 on a host
    rows = [json.loads(line) for line in run.paths.metrics.read_text().splitlines() if line.strip()]
    assert any(r.get("step") == 4 for r in rows)
