"""`validate --on slurm` and `cluster show slurm` against the real loopback controller: its default
partition (two nodes, 4 a100 each, no time limit) and the "short" one (one node, 2 l4 of 24 GB, 30
minutes, another torch on its Python's path); see tests/services/slurm.py. Every refusal is exit 2
with nothing queued and no run directory; the fitting recipe passes and `run` submits it."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from clustertune import api
from clustertune.api.cluster_check import ClusterCheckError
from clustertune.launch import job_for
from clustertune.runs.store import get_run
from tests.helpers import TINY_CAUSAL, cli_here, with_
from tests.services import slurm as loop

pytestmark = pytest.mark.usefixtures("slurm_cluster")

# GPT-2 XL's shape (1.6B parameters, fresh weights): full fine-tuning with AdamW needs about 24 GiB
# per GPU, over the short partition's 24 GB L4 and well under the default partition's 40 GB A100.
XL = {"n_layer": 48, "n_embd": 1600, "n_head": 25, "n_positions": 64}


def recipe_file(tmp_path: Path, name: str = "r.yaml", **launch) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(with_(TINY_CAUSAL, launch={"backend": "slurm", **launch})))
    return path


def probe_jobs() -> int:
    """How many node probes the controller has run (finished jobs stay listed for MinJobAge)."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-n", "ct-node-probe", "-o", "%i"], capture_output=True,
                         text=True, timeout=30)
    return len(out.stdout.split())


def queue() -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=30).stdout


def findings(report, status: str) -> dict[str, str]:
    return {f.what: f.said for f in report.findings if f.status == status}


def test_validate_on_refuses_limits_gpu_types_and_what_sbatch_refuses(tmp_path: Path) -> None:
    recipe = recipe_file(tmp_path, partition="short", time="2:00:00", nodes=2, gpus_per_node=1, gpu_type="a100")
    before = queue()
    out = cli_here("validate", str(recipe), "--on", "slurm", "--runs-root", str(tmp_path / "runs"))
    assert out.returncode == 2, out.stdout + out.stderr
    text = out.stdout
    # Every problem at once, each naming the key and the fix.
    assert f"launch.time=2:00:00 (120 min) is over partition short's MaxTime ({loop.SHORT_MAX_MINUTES} min): set " \
           f"launch.time={loop.SHORT_MAX_MINUTES}, or a partition that allows it (debug)" in text
    assert "launch.nodes=2 is over partition short's MaxNodes (1): set launch.nodes=1 or fewer" in text
    assert (f"1 x a100 per node on 2 node(s) asked (launch.gpu_type / gpus_per_node / gres); partition short has "
            f"{loop.SHORT_GPU_TYPE}") in text and "partition(s) with them: debug (launch.partition)" in text
    # sbatch's own verdict, quoted.
    assert re.search(r'PROBLEM\s+sbatch --test-only: refused: ".*Requested node configuration is not available"',
                     text), text
    assert "4 problem(s) above would stop the run on slurm" in out.stderr
    assert queue() == before and not (tmp_path / "runs").exists()

    # An unknown partition names the ones there are, and nothing else is asked of it.
    report = api.validate_on(str(recipe), ["launch.partition=gpu-big", "launch.nodes=1", "launch.time=10"], "slurm")
    assert findings(report, "problem")["partition"] == ("launch.partition=gpu-big: no such partition on cluster "
                                                        f"{report.facts['cluster']} (it has: debug, short)")


def test_validate_on_memory_fit_suggests_a_change_that_fits_and_sees_the_nodes_torch(tmp_path: Path) -> None:
    recipe = recipe_file(tmp_path, partition="short", gpus_per_node=1)
    report = api.validate_on(str(recipe), [f"model.config_overrides.{k}={v}" for k, v in XL.items()], "slurm",
                             refresh=True)
    problems = findings(report, "problem")
    assert set(problems) == {"memory", "node environment"}, report.lines()
    # The node's own nvidia-smi sized the GPU, and the estimate is over 90% of it.
    memory = problems["memory"]
    assert "per GPU (ddp, 1 rank(s)) of NVIDIA L4's 22.5 GiB: does not fit" in memory
    # The node's environment: another torch there (its distribution record), named against this one's.
    assert f"torch {loop.SHORT_TORCH} there" in problems["node environment"]
    seen = findings(report, "note")["node environment"]
    assert "n3: Python" in seen and "2 x NVIDIA L4 (compute capability 8.9, 23034 MiB, driver 535.104.05)" in seen

    # From the command line: exit 2, nothing queued (the node's answer is the one just kept).
    before = queue()
    out = cli_here("validate", str(recipe), "--on", "slurm", *(f"model.config_overrides.{k}={v}" for k, v in XL.items()))
    assert out.returncode == 2 and "does not fit" in out.stdout and f"torch {loop.SHORT_TORCH} there" in out.stdout
    assert "2 problem(s) above would stop the run on slurm" in out.stderr and queue() == before

    # The first suggestion, applied, fits the same GPU by the same estimator.
    first = re.search(r"Would fit: `([^`]+)`", memory).group(1).split()
    again = api.validate_on(str(recipe), [*(f"model.config_overrides.{k}={v}" for k, v in XL.items()), *first],
                            "slurm")
    assert "memory" in findings(again, "ok"), again.lines()
    # The default partition's 40 GB A100 holds it as it is.
    on_a100 = api.validate_on(str(recipe), [*(f"model.config_overrides.{k}={v}" for k, v in XL.items()),
                                            "launch.partition=debug", "launch.gpu_type=a100"], "slurm")
    assert on_a100.problems == [] and "of NVIDIA A100-SXM4-40GB's" in findings(on_a100, "ok")["memory"]


def test_validate_on_passes_a_fitting_recipe_keeps_the_probe_a_day_and_run_submits(tmp_path: Path) -> None:
    recipe = recipe_file(tmp_path, gpus_per_node=1, gpu_type="a100", time="20", setup=["echo validate-on"])
    out = cli_here("validate", str(recipe), "--on", "slurm", "--refresh")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok: nothing found that would stop it on slurm" in out.stdout
    assert re.search(r'ok\s+sbatch --test-only: accepted \(estimated start \S+\): "Job \d+ to start at', out.stdout)
    assert "not checked account/QoS" in out.stdout  # the loopback cluster keeps no accounting: said, not hidden

    # Within the day the node's answer is kept: no second probe job; --refresh asks again.
    probes = probe_jobs()
    kept = cli_here("validate", str(recipe), "--on", "slurm", "--json")
    assert kept.returncode == 0, kept.stderr
    data = json.loads(kept.stdout)
    assert data["ok"] and data["node"]["node"] in loop.NODES and probe_jobs() == probes
    assert any("probed within the day" in f["said"] for f in data["findings"])
    assert cli_here("validate", str(recipe), "--on", "slurm", "--refresh").returncode == 0
    assert probe_jobs() == probes + 1

    # The dry run shows the same answers; the run itself passes them and is submitted.
    dry = cli_here("run", str(recipe), "--dry-run", "--runs-root", str(tmp_path / "runs"))
    assert dry.returncode == 0 and "# asked slurm before the queue (0 problem(s)" in dry.stdout, dry.stderr
    started = cli_here("run", str(recipe), "--runs-root", str(tmp_path / "runs"))
    assert started.returncode == 0, started.stderr
    assert re.search(r"asked slurm before the queue: \d+ ok, \d+ not checked \(`clustertune validate RECIPE --on "
                     r"slurm` lists them\)", started.stderr), started.stderr
    run = get_run(re.search(r"run (\S+) submitted \(SLURM job \d+\)", started.stdout).group(1), tmp_path / "runs")
    assert run.attempts[-1].job_id.isdigit()
    job_for(run).cancel()


def test_validate_on_names_a_failing_setup_line_before_the_queue(tmp_path: Path) -> None:
    recipe = recipe_file(tmp_path, setup=["echo preparing", "exit 3"])
    with pytest.raises(ClusterCheckError, match=r"(?s)launch.setup: a setup line failed on a compute node, which stops "
                                                r"the job there: .*exit code 3.*preparing"):
        api.run(str(recipe), runs_root_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_cluster_show_slurm_lists_partitions_environments_and_what_fits() -> None:
    out = cli_here("cluster", "show", "slurm", "--json")
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    parts = {p["partition"]: p for p in facts["partitions"]}
    assert parts["debug"]["default"] and parts["debug"]["max_time_min"] is None
    assert parts["debug"]["gpus_per_node"] == {loop.GPU_TYPE: loop.GPUS_PER_NODE}
    assert parts["short"]["max_time_min"] == loop.SHORT_MAX_MINUTES and parts["short"]["max_nodes"] == 1
    assert parts["short"]["gpus_per_node"] == {loop.SHORT_GPU_TYPE: loop.SHORT_GPUS}
    assert parts["short"]["environment"]["torch"] == loop.SHORT_TORCH
    assert parts["short"]["gpu_memory_gib"] == 22.5 and parts["debug"]["gpu_memory_gib"] == 40.0
    # The larger GPU holds at least as large a model for every shipped way of training, and more for some.
    ladder = list(api.cluster_show.LADDER)
    rank = lambda size: -1 if size is None else ladder.index(size)  # noqa: E731
    assert facts["fits"] and all(rank(r["debug"]) >= rank(r["short"]) for r in facts["fits"])
    assert any(rank(r["debug"]) > rank(r["short"]) for r in facts["fits"])
    table = cli_here("cluster", "show", "slurm")
    assert table.returncode == 0 and re.search(r"short\s+1\s+UP\s+30 min\s+1\s+2 x l4\s+22.5 GiB", table.stdout)


def test_validate_on_offline_node_needs_the_hub_model_in_its_own_cache(tmp_path: Path, monkeypatch) -> None:
    # The suite runs with HF_HUB_OFFLINE=1, which the job inherits: the node has no hub.
    recipe = tmp_path / "hub.yaml"
    recipe.write_text(yaml.safe_dump({**TINY_CAUSAL, "model": {"name_or_path": "someorg/tiny-llm"},
                                      "launch": {"backend": "slurm"}}))
    hub = tmp_path / "hub-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    report = api.validate_on(str(recipe), [], "slurm")
    assert findings(report, "problem")["files"] == (
        f"someorg/tiny-llm: {report.facts['node']['node']} has no internet and its hub cache ({hub}) lacks it: on a "
        "machine with internet, `clustertune fetch RECIPE --store DIR` (DIR where the nodes see it) and run the "
        "recipe it writes")
    (hub / "models--someorg--tiny-llm" / "snapshots").mkdir(parents=True)  # what a fetch into that cache leaves
    again = api.validate_on(str(recipe), [], "slurm")
    assert again.problems == [] and "its hub cache" in findings(again, "ok")["files"]


def test_validate_on_a_busy_partition_says_not_checked_and_does_not_wait_again(tmp_path: Path, monkeypatch) -> None:
    from clustertune.launch import slurm_facts

    monkeypatch.setattr(slurm_facts, "PROBE_WAIT_S", 2)  # srun --immediate=2: the test's own patience
    blocker = subprocess.run(["sbatch", "--parsable", "-p", loop.SHORT, "--exclusive", "-o", str(tmp_path / "blocker.out"),
                              "--wrap", "sleep 120"],
                             capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while "RUNNING" not in subprocess.run(["squeue", "-h", "-j", blocker, "-o", "%T"], capture_output=True,
                                              text=True, timeout=30).stdout:
            assert time.monotonic() < deadline, "the blocking job never started"
            time.sleep(0.5)
        recipe = recipe_file(tmp_path, partition=loop.SHORT, setup=["echo busy-partition"])
        report = api.validate_on(str(recipe), [], "slurm")
        said = findings(report, "not checked")["node environment"]
        assert said.startswith("no node of the partition was free within 2 s to probe") and "busy" in said
        assert report.problems == []  # the controller's own answers passed: a busy node is no fault
        probes = probe_jobs()
        again = api.validate_on(str(recipe), [], "slurm")
        assert "within the hour before" in findings(again, "not checked")["node environment"]
        assert probe_jobs() == probes  # not waited for again
    finally:
        subprocess.run(["scancel", blocker], timeout=30)
