"""SLURM resource requests as sites write them, launch.env expansion, where data is prepared,
and what a dry run says: rendered text against golden files, bad combinations in-process.
(SLURM's own verdict on the same requests: tests/integration/test_slurm_resources.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clustertune.errors import LaunchError, RecipeError
from clustertune.launch.local import node_env
from clustertune.launch.plan import build_plan, expand_env_value, shell_expanding_quote
from clustertune.launch.sbatch import render_sbatch, sbatch_argv, sbatch_flags
from clustertune import api
from clustertune.launch.decision import plan_for, prepares_data_here
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CAUSAL, with_
from tests.unit.launch.test_launch_plan import check_golden

# The hf-slurm-training shape: 2 nodes, one task each, 8 GPUs and 32 CPUs per node, HF caches on scratch.
SITE_LAUNCH = {
    "backend": "slurm", "nodes": 2, "gres": "gpu:a100:8", "cpus_per_task": 32, "time": "1-00:00:00",
    "env": {"HF_HOME": "$SCRATCH/hf", "RUN_TAG": "${SLURM_JOB_ID}-a", "PRICE": "$$5 `x` \"q\" \\"},
    "setup": ["module load cuda/12.4"], "tmp_disk": "1500G", "job_name": "gpt2_multi",
}


def recipe_of(launch: dict):
    return load_recipe(with_(TINY_CAUSAL, launch=launch))


def plan_of(launch: dict):
    return build_plan(recipe_of(launch), "tiny-1", "/shared/runs/tiny-1", "/opt/venv/bin/python")


def test_site_style_script_matches_golden() -> None:
    text = render_sbatch(plan_of(SITE_LAUNCH))
    check_golden("sbatch_gres_cpus_per_task.sh", text)
    # Ranks per node from the allocation (the recipe's count as the fallback), never nvidia-smi.
    assert "nvidia-smi" not in text and "CT_NPROC=${SLURM_GPUS_ON_NODE:-8}" in text
    # Both steps ask for the task's CPUs: srun does not inherit --cpus-per-task since 22.05.
    assert text.count("--cpus-per-task=32 ") == 2


@pytest.mark.parametrize(("launch", "flags", "absent"), [
    ({"gpus_per_node": 8, "cpus_per_task": 32}, ["--gpus-per-node=8", "--cpus-per-task=32"], ["--cpus-per-gpu"]),
    ({"gpus_per_node": 4, "gpu_type": "a100"}, ["--gpus-per-node=a100:4"], ["--cpus-per-gpu", "--cpus-per-task"]),
    ({"gpus_per_task": 1, "gpu_type": "rtx8000", "cpus_per_gpu": 6}, ["--gpus-per-task=rtx8000:1", "--cpus-per-gpu=6"],
     ["--gpus-per-node", "--cpus-per-task"]),
    ({"gres": "gpu:8"}, ["--gres=gpu:8"], ["--gpus-per-node", "--cpus-per-gpu"]),
    ({"cpus_per_task": 4}, ["--cpus-per-task=4"], ["--gres", "--gpus", "--cpus-per-gpu"]),
])
def test_each_gpu_and_cpu_form_renders_exactly_what_was_asked(launch: dict, flags: list[str], absent: list[str]) -> None:
    rendered = sbatch_flags(plan_of({"backend": "slurm", **launch}))
    for f in flags:
        assert f in rendered
    for a in absent:
        assert not any(r.startswith(a) for r in rendered), (a, rendered)


@pytest.mark.parametrize(("launch", "key", "fix"), [
    ({"gpus_per_node": 4, "cpus_per_gpu": 8, "cpus_per_task": 32}, "launch.cpus_per_gpu", "keep one of"),
    ({"gpus_per_node": 4, "gres": "gpu:4"}, "launch.gres", "asked for twice"),
    ({"gpus_per_task": 1, "gpus_per_node": 4}, "launch.gpus_per_task", "asked for twice"),
    ({"gres": "gpu:4", "gpu_type": "a100"}, "launch.gpu_type", "gres=gpu:a100:N"),
    ({"gpu_type": "a100"}, "launch.gpu_type", "set one of them"),
    ({"cpus_per_gpu": 4}, "launch.cpus_per_gpu", "launch.cpus_per_task"),
    ({"sbatch_extra": ["--gres=gpu:2"]}, "launch.sbatch_extra", "launch.gres"),
    ({"sbatch_extra": ["--job-name=gpt2_multi"]}, "launch.sbatch_extra", "launch.job_name"),
    ({"sbatch_extra": ["-J gpt2_multi"]}, "launch.sbatch_extra", "launch.job_name"),
    ({"sbatch_extra": ["--tmp=1500G"]}, "launch.sbatch_extra", "launch.tmp_disk"),
    ({"sbatch_extra": ["-N2"]}, "launch.sbatch_extra", "launch.nodes"),
    ({"tmp_disk": "1.5T"}, "launch.tmp_disk", "no decimals"),
    ({"job_name": "my job"}, "launch.job_name", ""),
    ({"job_name": "x;reboot"}, "launch.job_name", ""),
    ({"gres": "gpu:4; reboot"}, "launch.gres", ""),
    ({"backend": "local", "prepare_data": "job"}, "launch.prepare_data", "'submitter'"),
])
def test_contradicting_requests_are_typed_errors_naming_the_key(launch: dict, key: str, fix: str) -> None:
    with pytest.raises(RecipeError) as err:
        recipe_of({"backend": "slurm", **launch})
    assert key in str(err.value) and fix in str(err.value)


@pytest.mark.parametrize("option", ["-o %j.out", "-o%j.out", "-e %j.err", "-e%j.err", "--output=%j.out",
                                    "--output %j.out", "--error=%j.err", "--error %j.err", " --error\t%j.err"])
def test_log_options_in_sbatch_extra_are_refused_however_spelled(option: str) -> None:
    with pytest.raises(RecipeError) as err:
        recipe_of({"backend": "slurm", "sbatch_extra": ["--exclusive", option]})
    said = str(err.value)
    assert "launch.sbatch_extra" in said and "stay in the run directory" in said and "launch.job_name" in said, said
    assert "--exclusive" not in said  # only the offending option is named


def test_job_name_and_node_local_disk_render_as_sbatch_lines_and_logs_stay_in_the_run() -> None:
    flags = sbatch_flags(plan_of({"backend": "slurm", "tmp_disk": 500, "job_name": "gpt2_multi"}))
    assert "--job-name=gpt2_multi" in flags and "--tmp=500" in flags  # a bare number is MB, as sbatch reads it
    assert "--job-name=ct-tiny-1" in sbatch_flags(plan_of({"backend": "slurm"}))  # the default: ct-<run id>
    assert not any(f.startswith("--tmp") for f in sbatch_flags(plan_of({"backend": "slurm"})))
    # Both streams go to the run's log, on the command line, where SBATCH_ERROR cannot move them.
    argv = sbatch_argv(plan_of({"backend": "slurm"}), Path("/shared/runs/tiny-1/job.sbatch"))
    log = "/shared/runs/tiny-1/logs/slurm-%j.out"
    assert f"--output={log}" in argv and f"--error={log}" in argv


@pytest.mark.parametrize("value", [
    "$SCRATCH/hf", "${SCRATCH}x/$UNSET_VAR_CT/y", "$$HOME", "a $(touch /tmp/pwned-ct-env) `id` b",
    "quote \" back\\slash ' single", "$1 $? $ {x} ${bad-form}", "*", "", "new\nline",
])
def test_env_values_expand_on_the_node_exactly_as_the_pure_function_says(value: str) -> None:
    environ = {"SCRATCH": "/scratch/me", "HOME": "/home/me", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", f"export CT_V={shell_expanding_quote(value)}; printf %s \"$CT_V\""],
                         capture_output=True, text=True, env=environ, check=True).stdout
    assert out == expand_env_value(value, environ)
    assert not Path("/tmp/pwned-ct-env").exists()


def _node_env_after_the_batch_shell(text: str, plan, node: dict[str, str]) -> dict[str, str]:
    """The environment a step of the rendered script sees on a node: the batch shell's lines (on
    the first node) run, then the step started the way srun starts it there: the batch shell's
    environment, with the node's own SLURM variables (``node``) over it."""
    import json
    import shlex
    import sys

    from clustertune.launch.sbatch import on_each_node

    batch = text[text.index("CT_RUN_DIR="):text.index("if ! [ -x")]  # launch.env and the setup lines
    dump = f"{shlex.quote(sys.executable)} -c 'import json, os; print(json.dumps(dict(os.environ)))'"
    step = " ".join(f"{k}={v}" for k, v in node.items()) + " " + on_each_node(plan, dump)
    first = {"PATH": "/usr/bin:/bin", "SLURM_NODEID": "0", "SLURM_TMPDIR": "/tmp/n0/7", "SLURM_JOB_ID": "7"}
    out = subprocess.run(["bash", "-c", batch + step], capture_output=True, text=True, env=first, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_env_values_naming_variables_expand_on_each_node_in_its_own_srun_step() -> None:
    launch = {"backend": "slurm", "nodes": 2,
              "env": {"STAGE_DIR": "$SLURM_TMPDIR/stage", "NODE_TAG": "node-${SLURM_NODEID}-of-$SLURM_JOB_ID",
                      "A_EARLY": "${B_LATE}/a", "B_LATE": "/b", "Z_LATE": "$STAGE_DIR/z", "PATH": "/opt/tools:$PATH",
                      "PLAIN": "$$HOME"},
              "setup": ["export PATH=/venv/bin:$PATH"]}
    plan = plan_of(launch)
    text = render_sbatch(plan)
    for node, tmp in (("0", "/tmp/n0/7"), ("1", "/tmp/n1/7")):
        env = _node_env_after_the_batch_shell(text, plan, {"SLURM_NODEID": node, "SLURM_TMPDIR": tmp})
        # Each node's own values, not the first node's that srun hands on...
        assert env["STAGE_DIR"] == f"{tmp}/stage" and env["Z_LATE"] == f"{tmp}/stage/z"
        assert env["NODE_TAG"] == f"node-{node}-of-7"
        # ...expanded as the batch shell expanded them: in sorted order (B_LATE was not set yet)...
        assert env["A_EARLY"] == "/a" and env["B_LATE"] == "/b" and env["PLAIN"] == "$HOME"
        # ...and a value adding to itself added once, with what the setup lines added kept.
        assert env["PATH"] == "/venv/bin:/opt/tools:/usr/bin:/bin"
    # Both steps expand on their node: the data step and the training step.
    assert text.count("""/bin/bash -c "$CT_NODE_ENV"'; exec "$@"' ct-node /opt/venv/bin/python -m""") == 2
    # Nothing to expand, nothing added: the steps run their commands as they are.
    plain = render_sbatch(plan_of({"backend": "slurm", "env": {"HF_HOME": "/scratch/hf"}}))
    assert "CT_NODE_ENV" not in plain and "ct-node" not in plain


def test_local_runs_expand_env_values_the_same_way() -> None:
    plan = build_plan(recipe_of({"procs_per_node": 2, "env": {"HF_HOME": "$SCRATCH/hf", "Z": "${HF_HOME}/z"}}),
                      "r", "/tmp/r", "python")
    env = node_env(plan, {"SCRATCH": "/s"})
    assert env["HF_HOME"] == "/s/hf" and env["Z"] == "/s/hf/z"  # sorted exports: Z sees HF_HOME


def test_ssh_hosts_expand_env_values_the_same_way_and_never_secrets() -> None:
    from clustertune.remote.runner import _apply_env

    env = {"HF_HOME": "$SCRATCH/hf", "Z": "${HF_HOME}/z $$", "HF_TOKEN": "pa$$word$SCRATCH"}
    environ = {"SCRATCH": "/s"}
    _apply_env(env, ["HF_HOME", "Z"], environ)
    assert environ["HF_HOME"] == expand_env_value("$SCRATCH/hf", {"SCRATCH": "/s"}) == "/s/hf"
    assert environ["Z"] == "/s/hf/z $" and environ["HF_TOKEN"] == "pa$$word$SCRATCH"


def test_setup_lines_stop_the_job_on_failure() -> None:
    text = render_sbatch(plan_of({"backend": "slurm", "setup": ["module load cuda"]}))
    body = text[text.index('step "setup"'):text.index("set +e")]
    assert "set -e" in body and "trap" in body and "module load cuda" in body


def test_where_data_is_prepared_is_a_setting_per_backend() -> None:
    assert prepares_data_here(recipe_of({"backend": "slurm"}), False) is False
    assert prepares_data_here(recipe_of({"backend": "slurm", "prepare_data": "submitter"}), False) is True
    assert prepares_data_here(recipe_of({"backend": "local"}), True) is True
    assert prepares_data_here(recipe_of({"backend": "ssh", "cluster": "c", "prepare_data": "submitter"}), True) is True


def test_dry_run_shows_the_sbatch_command_site_defaults_and_warns_about_unset_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    # The shipped recipe: public model and data, HF_TOKEN passed through if the user has one.
    text = api.dry_run(load_recipe("gpt2-wikitext2-slurm"), runs_root_dir=tmp_path / "runs")
    assert "# warning: launch.env_passthrough: HF_TOKEN is not set" in text
    cmd = next(line for line in text.splitlines() if line.startswith("sbatch "))
    assert cmd.startswith("sbatch --parsable --output=") and cmd.endswith("/job.sbatch")
    assert str(tmp_path / "runs") in cmd
    assert "site default: launch.account, launch.qos unset" in text
    assert '"account": "site default"' in text and '"partition": "gpu"' in text
    assert "data: prepared as the job's first step" in text and "must exist at that path on every node" in text
    assert "no CPUs asked for" not in text  # the shipped recipe asks for 8 per GPU
    bare = api.dry_run(recipe_of({"backend": "slurm", "gres": "gpu:4"}), runs_root_dir=tmp_path / "runs")
    assert "no CPUs asked for: the site's default per task (often 1) serves the 4 ranks" in bare
    assert not (tmp_path / "runs").exists()
    # Where a job would start, the unset secret is still an error, saying both ways out.
    with pytest.raises(LaunchError, match="HF_TOKEN not set.*drop it from launch.env_passthrough"):
        plan_for(load_recipe("gpt2-wikitext2-slurm"), "x", tmp_path)


def test_device_cpu_hides_the_gpus_from_every_rank_and_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from clustertune.train.preflight import use_device
    from clustertune.launch.decision import needs_launcher

    r = load_recipe(with_(TINY_CAUSAL, train={"device": "cpu"}))
    assert dict(build_plan(r, "r", "/tmp/r", "python").env)["CUDA_VISIBLE_DEVICES"] == ""
    # Two GPUs visible: auto would start a rank per GPU, cpu trains in this one process.
    assert needs_launcher(recipe_of({}), {"CUDA_VISIBLE_DEVICES": "0,1"}) is True
    assert needs_launcher(r, {"CUDA_VISIBLE_DEVICES": "0,1"}) is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    use_device(r)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_env_build_takes_torch_from_the_cpu_index_only_on_hosts_without_gpus() -> None:
    import shlex

    from clustertune.remote.envs import Env
    from clustertune.remote.runner_host import pip_commands

    spec = Env(requirements=("torch==2.13.0", "transformers", "torchvision"), index_url="https://mirror/simple",
               pip_args=("--no-cache-dir",)).spec("/usr/bin/python3")
    lines = []
    for gpus in (0, 2):
        lines += [f"# host with {gpus} GPU(s)", *(shlex.join(c) for c in pip_commands(spec, "/env/bin/python", gpus))]
    check_golden("pip_build_env.txt", "\n".join(lines) + "\n")
    # No torch asked for, or no CPU index: the usual single install.
    assert len(pip_commands({**spec, "requirements": ["transformers"]}, "py", 0)) == 1
    assert len(pip_commands({**spec, "torch_cpu_index": None}, "py", 0)) == 1


def test_srun_runner_starts_every_rank_as_a_slurm_task_without_torchrun() -> None:
    launch_ = {"backend": "slurm", "nodes": 2, "runner": "srun", "gres": "gpu:4", "cpus_per_gpu": 2}
    plan = build_plan(recipe_of(launch_), "r", "/shared/runs/r", "/opt/venv/bin/python", command=["python", "train.py"])
    text = render_sbatch(plan)
    assert "#SBATCH --ntasks-per-node=4" in text  # one task per GPU asked for
    assert "srun --kill-on-bad-exit=1 --ntasks-per-node=4 --ntasks=8 --cpus-per-task=2 --open-mode=append" in text
    assert "-m clustertune.script.rank --slurm-ranks python train.py &" in text and "torch.distributed.run" not in text
    # procs_per_node wins; the other runners keep one task (one torchrun agent) per node.
    counted = build_plan(recipe_of({**launch_, "procs_per_node": 2}), "r", "/r", "py", command=["x"])
    assert "#SBATCH --ntasks-per-node=2" in render_sbatch(counted) and "--ntasks=4 " in render_sbatch(counted)
    agent = build_plan(recipe_of({**launch_, "runner": "torchrun"}), "r", "/r", "py", command=["x"])
    assert "#SBATCH --ntasks-per-node=1" in render_sbatch(agent) and "torch.distributed.run" in render_sbatch(agent)


def test_slurm_task_variables_become_torchruns() -> None:
    from clustertune.script.rank import slurm_rank_env

    env = {"SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NTASKS": "4", "SLURM_NNODES": "2",
           "SLURM_NTASKS_PER_NODE": "2", "SLURM_NODEID": "1", "CLUSTERTUNE_MASTER_ADDR": "10.0.0.7",
           "CLUSTERTUNE_MASTER_PORT": "21234"}
    assert slurm_rank_env(env) == {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                                   "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "21234"}
    del env["SLURM_NTASKS_PER_NODE"]
    assert slurm_rank_env(env)["LOCAL_WORLD_SIZE"] == "2"
