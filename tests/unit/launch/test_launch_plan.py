"""Launch plans and rendered sbatch scripts: pure functions, compared with golden files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clustertune.errors import LaunchError, RecipeError
from clustertune.launch.plan import build_plan, node_command
from clustertune.launch.sbatch import render_sbatch, sbatch_argv, sbatch_flags
from clustertune import api
from clustertune.launch.decision import plan_for
from clustertune.runs.topology import Topology
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CAUSAL, with_

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
HOSTILE = "/tmp/my runs/it's; touch /tmp/pwned-ct \"x\" $(id)"

SLURM_LAUNCH = {
    "backend": "slurm", "nodes": 2, "gpus_per_node": 4, "cpus_per_gpu": 8, "mem": "64G", "time": "04:00:00",
    "partition": "gpu", "account": "proj1", "qos": "normal", "constraint": "a100", "dependency": "afterok:41",
    "sbatch_extra": ["--exclusive"], "setup": ["module load cuda/12.4", "source /opt/venv/bin/activate"],
    "env": {"NCCL_DEBUG": "WARN"}, "env_passthrough": ["HF_TOKEN"], "nccl_socket_ifname": "ib0",
    "rdzv_timeout": 600, "max_restarts": 1,
}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    before = path.read_text(encoding="utf-8") if path.is_file() else None
    if before != text and os.environ.get("CLUSTERTUNE_UPDATE_GOLDEN") == "1":
        # Update mode writes the new text but still fails: the comparison is always against
        # what was there, never the file with itself. Review the diff, then run again.
        path.write_text(text, encoding="utf-8")
        pytest.fail(f"{path} updated; review `git diff {path}` and run again without CLUSTERTUNE_UPDATE_GOLDEN")
    assert before is not None, f"{path} missing; create it with CLUSTERTUNE_UPDATE_GOLDEN=1"
    assert text == before, f"rendered text differs from {path}"


def plan_of(launch: dict, run_dir: str = "/shared/runs/tiny-1") -> object:
    return build_plan(load_recipe(with_(TINY_CAUSAL, launch=launch)), "tiny-1", run_dir, "/opt/venv/bin/python")


def test_two_node_gpu_script_matches_golden() -> None:
    plan = plan_of(SLURM_LAUNCH)
    check_golden("sbatch_two_nodes_gpu.sh", render_sbatch(plan))
    check_golden("plan_two_nodes_gpu.json", plan.to_json())


def test_cpu_script_with_defaults_matches_golden() -> None:
    check_golden("sbatch_cpu_defaults.sh", render_sbatch(plan_of({"backend": "slurm", "cpus_per_task": 2, "procs_per_node": 2})))


def test_sbatch_flags_are_sorted_and_extra_lines_follow() -> None:
    flags = sbatch_flags(plan_of(SLURM_LAUNCH))
    assert flags[:-1] == sorted(flags[:-1])
    assert flags[-1] == "--exclusive"
    assert "--gpus-per-node=4" in flags and "--cpus-per-gpu=8" in flags and "--signal=B:USR2@90" in flags


def test_rendering_is_deterministic_and_secret_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    plan = plan_of(SLURM_LAUNCH)
    text = render_sbatch(plan)
    assert text == render_sbatch(plan_of(SLURM_LAUNCH))
    assert "hf_secret_value_123" not in text and "hf_secret_value_123" not in plan.to_json()
    assert "HF_TOKEN" in text  # named as passed through, value not written


def test_hostile_run_dir_and_env_values_are_quoted(tmp_path: Path) -> None:
    pwned = Path("/tmp/pwned-ct")
    pwned.unlink(missing_ok=True)
    weird = "a'b\"c; touch /tmp/pwned-ct $(id) `id`"
    plan = plan_of({"backend": "slurm", "env": {"WEIRD": weird}}, run_dir=HOSTILE)
    script = tmp_path / "job.sbatch"
    script.write_text(render_sbatch(plan))
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    # Evaluate the script's own assignments in a real shell: the values come back unchanged.
    lines = [ln for ln in script.read_text().splitlines() if ln.startswith(("CT_RUN_DIR=", "CT_STOP_FILE=", "export WEIRD="))]
    out = subprocess.run(["bash", "-c", "\n".join(lines) + '\nprintf "%s\\n%s\\n%s" "$CT_RUN_DIR" "$CT_STOP_FILE" "$WEIRD"'],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split("\n") == [HOSTILE, HOSTILE + "/stop-request", weird]
    assert not pwned.exists()
    argv = sbatch_argv(plan, Path(HOSTILE) / "job.sbatch")
    assert argv[-1] == HOSTILE + "/job.sbatch" and f"--output={HOSTILE}/logs/slurm-%j.out" in argv  # argv, no shell


def test_sbatch_option_with_a_line_break_is_refused() -> None:
    with pytest.raises(LaunchError, match="line break"):
        render_sbatch(plan_of({"backend": "slurm", "partition": "gpu\nrm -rf /"}))


def test_node_command_is_a_function_of_node_rank_and_addresses() -> None:
    plan = plan_of({"backend": "slurm", "nodes": 2, "procs_per_node": 2})
    a = node_command(plan, 0, ["10.0.0.1", "10.0.0.2"], 29400, "job-0", 2)
    b = node_command(plan, 1, ["10.0.0.1", "10.0.0.2"], 29400, "job-0", 2)
    assert a == b  # c10d assigns ranks: every node runs the same command
    assert "--rdzv-endpoint=10.0.0.1:29400" in a and "--rdzv-id=job-0" in a and "--nnodes=2" in a
    assert a[-3:] == ["-m", "clustertune.train.entry", "/shared/runs/tiny-1"]
    single = node_command(plan_of({"procs_per_node": 2}), 0, ["127.0.0.1"], 0, "x", 2)
    assert "--standalone" in single and "--nproc-per-node=2" in single


def test_secret_looking_env_and_missing_passthrough_are_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Refused where every recipe is read (validate, --dry-run, run), before any plan exists.
    with pytest.raises(RecipeError, match="launch.env: WANDB_API_KEY.*env_passthrough"):
        load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "env": {"WANDB_API_KEY": "abc"}}))
    monkeypatch.delenv("MY_TOKEN", raising=False)
    r = load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "env_passthrough": ["MY_TOKEN"]}))
    with pytest.raises(LaunchError, match="MY_TOKEN not set"):
        plan_for(r, "x", tmp_path)


@pytest.mark.parametrize(("launch", "key"), [
    ({"nodes": 0}, "launch.nodes"),
    ({"nodes": 2}, "launch.nodes"),  # several nodes need slurm
    ({"procs_per_node": 0}, "launch.procs_per_node"),
    ({"backend": "kubernetes"}, "launch.backend"),
    ({"signal": "USR2; reboot"}, "launch.signal"),
    ({"nodez": 2}, "launch.nodez"),
])
def test_bad_launch_sections_name_the_key(launch: dict, key: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe(with_(TINY_CAUSAL, launch=launch))
    assert key in str(err.value)


def test_dry_run_prints_plan_and_script_without_creating_anything(tmp_path: Path) -> None:
    r = load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "nodes": 2}))
    text = api.dry_run(r, runs_root_dir=tmp_path / "runs")
    assert "#SBATCH --nodes=2" in text and '"backend": "slurm"' in text
    assert not (tmp_path / "runs").exists()


def test_topology_from_torchrun_and_slurm_env() -> None:
    t = Topology.from_env({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                           "GROUP_RANK": "1", "MASTER_ADDR": "n1", "MASTER_PORT": "29500",
                           "SLURM_JOB_ID": "77", "SLURM_RESTART_COUNT": "2", "SLURMD_NODENAME": "n2"})
    assert (t.rank, t.local_rank, t.world_size, t.node_rank, t.job_id, t.restart_count) == (3, 1, 4, 1, "77", 2)
    assert not t.is_main and not t.is_node_main and t.node_name == "n2"
    assert Topology.from_env({}) == Topology()
    with pytest.raises(ValueError, match="RANK=4"):
        Topology.from_env({"RANK": "4", "WORLD_SIZE": "4"})


def test_local_process_count_is_checked_against_gpus_and_cores() -> None:
    from clustertune.launch.local import local_procs, visible_gpus

    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}) == 2 and visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert local_procs(plan_of({}), env={"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3  # default: one per GPU
    assert local_procs(plan_of({}), env={"CUDA_VISIBLE_DEVICES": ""}, cpus=2) == 1  # no GPU: one
    with pytest.raises(LaunchError, match="procs_per_node=4 but this host has 2 GPU"):
        local_procs(plan_of({"procs_per_node": 4}), env={"CUDA_VISIBLE_DEVICES": "0,1"})
    with pytest.raises(LaunchError, match="procs_per_node=3 but this host has no GPU and 2 CPU"):
        local_procs(plan_of({"procs_per_node": 3}), env={"CUDA_VISIBLE_DEVICES": ""}, cpus=2)


def test_script_computes_the_rendezvous_on_the_node_as_the_plan_defines_it() -> None:
    from clustertune.launch.plan import rdzv_id, rdzv_port

    lines = [ln for ln in render_sbatch(plan_of({"backend": "slurm", "nodes": 2})).splitlines()
             if ln.startswith(("CT_RESTART=", "export PET_RDZV"))]
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "123456", "SLURM_RESTART_COUNT": "2", "CT_RDZV_HOST": "10.1.2.3"}
    out = subprocess.run(["bash", "-c", "\n".join(lines) + '\necho "$PET_RDZV_ENDPOINT $PET_RDZV_ID"'],
                         capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == [f"10.1.2.3:{rdzv_port(123456)}", rdzv_id("123456", 2)]


def test_derived_rendezvous_ports_stay_below_the_ephemeral_range() -> None:
    """A port the kernel hands out for bind(0) or a connection is never a rendezvous port: torchrun's
    agents would join that socket instead of hosting the store, and wait out join_timeout."""
    from clustertune.launch.plan import rdzv_port
    from clustertune.launch.ssh import rendezvous_port

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])  # Linux: 32768 unless tuned
    slurm = [rdzv_port(job) for job in range(0, 2_000_000, 7)]
    ssh = [rendezvous_port(f"run-{i}-1") for i in range(5000)]
    ports = slurm + ssh
    assert 1024 < min(ports) and max(ports) < low, (min(ports), max(ports), low)
    # Still spread: consecutive SLURM jobs get different ports, and SSH keys land all over the span.
    assert len({rdzv_port(job) for job in range(12_000)}) == 12_000 and len(set(ssh)) > 3_500


def test_launcher_is_used_for_several_processes_or_gpus_and_slurm() -> None:
    from clustertune.launch.decision import needs_launcher

    def recipe(launch: dict) -> object:
        return load_recipe(with_(TINY_CAUSAL, launch=launch))

    no_gpu, four_gpus = {"CUDA_VISIBLE_DEVICES": ""}, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert not needs_launcher(recipe({}), no_gpu)  # one process, in this one
    assert needs_launcher(recipe({}), four_gpus)  # unset: one rank per GPU
    assert not needs_launcher(recipe({"procs_per_node": 1}), four_gpus)
    assert needs_launcher(recipe({"procs_per_node": 2}), no_gpu)
    assert needs_launcher(recipe({"backend": "slurm"}), no_gpu)


def test_slurm_options_are_the_launch_sections_keys() -> None:
    """Every scheduler option of a plan is a launch key with the same default: the schema is
    the one place they are declared and documented."""
    from dataclasses import fields

    from clustertune.launch.plan import SLURM_KEY_OF, SlurmOptions
    from clustertune.recipe.schema import LaunchSection

    defaults = LaunchSection()
    for f in fields(SlurmOptions):
        key = SLURM_KEY_OF.get(f.name, f.name)
        assert key in LaunchSection.model_fields, f"SlurmOptions.{f.name} has no launch.{key}"
        want = getattr(defaults, key)
        assert getattr(SlurmOptions(), f.name) == (tuple(want) if isinstance(want, list) else want)
    plan = build_plan(load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "partition": "gpu",
                                                              "sbatch_extra": ["--exclusive"]})), "r", "/tmp/r", "python")
    assert plan.slurm.partition == "gpu" and plan.slurm.extra == ("--exclusive",)


@pytest.mark.parametrize(("name", "secret"), [
    ("DB_PASS", True), ("GITHUB_PAT", True), ("WANDB_KEY", True), ("OPENAI_APIKEY", True), ("HF_AUTH", True),
    ("HF_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True), ("my_password", True), ("GCP_CREDENTIALS", True),
    ("TOKENIZERS_PARALLELISM", False), ("SSH_AUTH_SOCK", False), ("NCCL_DEBUG", False), ("KEYBOARD", False),
    ("PASSES", False), ("AUTHOR", False), ("MONKEY_PATCH", False), ("PATH", False), ("OMP_NUM_THREADS", False),
])
def test_secret_looking_env_names_go_by_whole_words(name: str, secret: bool, tmp_path: Path) -> None:
    from clustertune.recipe.launch_checks import secret_looking

    assert secret_looking(name) is secret
    recipe = with_(TINY_CAUSAL, launch={"backend": "slurm", "env": {name: "x"}})
    if secret:
        with pytest.raises(RecipeError, match=f"launch.env: {name}.*env_passthrough"):
            load_recipe(recipe)
    else:
        assert (name, "x") in plan_for(load_recipe(recipe), "x", tmp_path).env
