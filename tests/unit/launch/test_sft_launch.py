"""The shipped SFT demo recipe under the launchers: its SSH plan (a dry run) against a golden file."""

from __future__ import annotations

from pathlib import Path

from clustertune.launch.plan import build_plan
from clustertune.launch.ssh import dry_run_lines
from clustertune.recipe.load import load_recipe
from clustertune.remote.config import HostSpec, add_cluster
from tests.unit.launch.test_launch_plan import check_golden


def test_ssh_plan_of_the_sft_demo_matches_golden(ct_config: Path) -> None:
    add_cluster("gpu-boxes", [HostSpec(address="10.0.0.1", port=22, user="alice", root="/scratch/ct"),
                              HostSpec(address="10.0.0.2", port=22, user="alice", root="/scratch/ct")])
    recipe = load_recipe("sft-demo", ["model.name_or_path=/shared/models/quickstart", "launch.backend=ssh",
                                      "launch.cluster=gpu-boxes", "launch.nodes=2", "launch.procs_per_node=2"])
    plan = build_plan(recipe, "sft-demo-1", "/shared/runs/sft-demo-1", "/opt/venv/bin/python")
    text = plan.to_json() + "\n" + "\n".join(dry_run_lines(plan, recipe.launch)) + "\n"
    check_golden("ssh_sft_demo.txt", text)
