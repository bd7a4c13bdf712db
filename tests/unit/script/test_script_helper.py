"""The helper a user's own script imports, its per-rank wrapper, and how `clustertune launch`
reads its command line: no cluster, no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clustertune.cli.launch_cmds import split_command
from clustertune.launch.command import command_exit_code, load_launch, run_name
from clustertune.launch.plan import build_plan, node_command
from clustertune.script.rank import fill_placeholders
from tests.helpers import cli


def _imported(tmp_path: Path, code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    return {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}


def test_importing_the_helper_loads_no_third_party_module(tmp_path: Path) -> None:
    # What the interpreter loads at start-up (site's .pth hooks) is not the helper's doing.
    names = _imported(tmp_path, "import clustertune.script") - _imported(tmp_path, "pass")
    tops = {n.split(".")[0] for n in names}
    assert "clustertune.script" in names
    assert sorted(t for t in tops if t not in sys.stdlib_module_names and t != "clustertune") == []
    assert not {"pydantic", "yaml", "torch", "typer"} & tops


def test_the_package_exports_still_load_on_first_use() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, clustertune as ct; assert 'pydantic' not in sys.modules; "
                          "print(ct.RunState.COMPLETED.value, ct.load_recipe.__name__, ct.UserError.__name__)"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["COMPLETED", "load_recipe", "UserError"]


def test_should_stop_sees_the_stop_file_and_sigterm(tmp_path: Path) -> None:
    code = ("import os, signal, time\nfrom clustertune import script\n"
            "assert not script.should_stop()\n"
            "os.kill(os.getpid(), signal.SIGTERM); time.sleep(0.1)\n"  # caught: the flag is set, the process lives
            "print(script.should_stop(), script.attempt(), script.checkpoint_dir())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"CLUSTERTUNE_RUN_DIR": str(tmp_path), "CLUSTERTUNE_ATTEMPT": "3",
                              "CLUSTERTUNE_CHECKPOINT_DIR": str(tmp_path / "ck"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "3", str(tmp_path / "ck")]
    (tmp_path / "stop-request").write_text("USR2\n")
    code = "from clustertune import script\nprint(script.should_stop())\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"CLUSTERTUNE_RUN_DIR": str(tmp_path)})
    assert out.stdout.strip() == "True", out.stderr


def test_a_rank_that_is_exiting_ignores_a_late_stop_request() -> None:
    # Python restores SIG_DFL for its handlers late in shutdown; a SIGTERM from the rank's wrapper
    # arriving then would turn a clean exit 0 into 143. The helper's exit hook runs before that.
    code = ("import atexit, signal\nfrom clustertune import script\n"
            "atexit.register(lambda: print('at exit', signal.getsignal(signal.SIGTERM) is signal.SIG_IGN))\n"
            "print('running', script.should_stop(), signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["running False False", "at exit True"]


def test_placeholders_are_filled_per_node_and_other_braces_left_alone() -> None:
    env = {"CLUSTERTUNE_NODE_RANK": "1", "CLUSTERTUNE_NNODES": "2", "CLUSTERTUNE_MASTER_ADDR": "10.0.0.7",
           "CLUSTERTUNE_MASTER_PORT": "29400", "CLUSTERTUNE_RUN_DIR": "/r un"}
    argv = ["accelerate", "launch", "--machine_rank={node_rank}", "--num_machines", "{nnodes}",
            "--main_process_ip={master_addr}:{master_port}", "{run_dir}/out", "{unknown}", "{}", "a'b; rm -rf /"]
    assert fill_placeholders(argv, env) == [
        "accelerate", "launch", "--machine_rank=1", "--num_machines", "2", "--main_process_ip=10.0.0.7:29400",
        "/r un/out", "{unknown}", "{}", "a'b; rm -rf /"]
    assert fill_placeholders(["{node_rank}"], {"SLURM_NODEID": "3"}) == ["3"]


def test_the_command_after_the_double_dash_is_kept_whole() -> None:
    assert split_command(["launch", "launch.procs_per_node=2", "--", "python", "t.py", "--", "--lr", "3"]) == (
        ["launch", "launch.procs_per_node=2"], ["python", "t.py", "--", "--lr", "3"])
    assert split_command(["--debug", "launch", "--dry-run", "--"]) == (["--debug", "launch", "--dry-run"], [])
    assert split_command(["run", "x.yaml", "--", "y"]) == (["run", "x.yaml", "--", "y"], None)
    assert split_command(["launch", "--resume", "ID"]) == (["launch", "--resume", "ID"], None)


def test_a_launch_file_holds_a_launch_section_only(tmp_path: Path) -> None:
    good = tmp_path / "launch.yaml"
    good.write_text("name: mine\nlaunch:\n  procs_per_node: 2\n  stop_grace_seconds: 5\n")
    recipe = load_launch(good, ["launch.nodes=1"], ["python", "train.py"])
    assert (recipe.name, recipe.launch.procs_per_node, recipe.launch.stop_grace_seconds) == ("mine", 2, 5)
    bad = tmp_path / "recipe.yaml"
    bad.write_text("launch: {procs_per_node: 2}\ntrain: {lr: 0.1}\n")
    with pytest.raises(Exception, match="train do\\(es\\) not apply to your own script"):
        load_launch(bad, [], ["python", "train.py"])
    with pytest.raises(Exception, match="procs_per_nod"):
        load_launch(None, ["launch.procs_per_nod=2"], ["python", "train.py"])
    assert load_launch(None, [], ["python", "-u", "dir/train.py"]).name == "train"
    assert run_name(["./run.sh"]) == "run"


def test_the_plan_of_a_command_wraps_it_and_a_recipes_plan_reads_as_before() -> None:
    recipe = load_launch(None, ["launch.procs_per_node=2"], ["python", "train.py"])
    plan = build_plan(recipe, "r1", "/runs/r1", "/venv/bin/python", ["python", "train.py", "--lr", "3"])
    argv = node_command(plan, 0, ["127.0.0.1"], 0, "r1", 2)
    assert argv[-6:] == ["-m", "clustertune.script.rank", "python", "train.py", "--lr", "3"]
    assert dict(plan.env)["CLUSTERTUNE_RUN_DIR"] == "/runs/r1"
    assert json.loads(plan.to_json())["command"] == ["python", "train.py", "--lr", "3"]
    none = build_plan(load_launch(None, ["launch.runner=none"], ["x"]), "r1", "/runs/r1", "/py", ["accelerate", "launch", "t.py"])
    assert node_command(none, 0, ["127.0.0.1"], 0, "r1", 1) == [
        "/py", "-m", "clustertune.script.rank", "--per-node", "accelerate", "launch", "t.py"]
    plain = build_plan(recipe, "r1", "/runs/r1", "/py")
    assert "command" not in json.loads(plain.to_json()) and "CLUSTERTUNE_RUN_DIR" not in dict(plain.env)


def test_the_failed_ranks_exit_code_is_read_from_torchruns_summary() -> None:
    assert command_exit_code(1, "  rank      : 0 (local_rank: 0)\n  exitcode  : 127 (pid: 9)\n") == 127
    assert command_exit_code(0, "exitcode  : 127") == 0 and command_exit_code(3, "nothing") == 3


def test_cli_launch_dry_run_prints_the_plan_and_starts_nothing(runs_root: Path) -> None:
    out = cli("launch", "launch.procs_per_node=2", "--dry-run", "--", "python", "train.py", "--lr", "3e-4")
    assert out.returncode == 0, out.stderr
    assert '"command": [' in out.stdout and "clustertune.script.rank python train.py --lr 3e-4" in out.stdout
    assert not runs_root.exists()
    out = cli("launch", "launch.procs_per_node=2")
    assert out.returncode == 2 and "give the command to run after `--`" in out.stderr


def test_a_ranks_lines_carry_its_rank_on_the_node_and_are_as_written_in_its_own_log(tmp_path: Path) -> None:
    """The node's output (an SSH host's log, a SLURM node's) tells the ranks apart, as `torchrun
    --tee` does; the rank's own log has its lines as the script wrote them."""
    code = "print('first'); print('[rank 0] a line of its own')"
    env = {**os.environ, "CLUSTERTUNE_RUN_DIR": str(tmp_path), "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
    out = subprocess.run([sys.executable, "-m", "clustertune.script.rank", sys.executable, "-c", code],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[rank 1] first\n[rank 1] [rank 0] a line of its own\n"
    assert (tmp_path / "logs" / "rank-1.log").read_text() == "first\n[rank 0] a line of its own\n"
    # The wrapper's own lines (here: a command that is not there) are in the rank's log too.
    gone = subprocess.run([sys.executable, "-m", "clustertune.script.rank", "no-such-command-here"],
                          capture_output=True, text=True, env={**env, "RANK": "0"}, timeout=60)
    assert gone.returncode == 127 and "clustertune: cannot start 'no-such-command-here'" in gone.stdout
    assert (tmp_path / "logs" / "rank-0.log").read_text() == gone.stdout


def test_the_foreground_shows_rank_0_or_every_rank_as_launch_tee_says() -> None:
    from clustertune.launch.command import shown_line

    lines = ["[rank 0] step 1", "[rank 1] step 1", "[node 1] [rank 3] loss 2.0", "[node 0] [rank 0] loss 2.0",
             "clustertune: stop requested", "[node 1] clustertune: staged /data", "[rank 1] [rank 0] quoted"]
    assert [shown_line(ln, "rank0") for ln in lines] == [
        "step 1", None, None, "[node 0] loss 2.0", "clustertune: stop requested", "[node 1] clustertune: staged /data",
        None]
    assert [shown_line(ln, "all") for ln in lines] == lines
    # torchrun's own lines (its warnings, its failure block) stay in the node logs.
    torchrun = ["[node 0] E1201 21:49:57.410000 3371 torch/distributed/elastic/multiprocessing/api.py:1002] failed",
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "  rank      : 1 (local_rank: 0)"]
    assert [shown_line(ln, tee) for ln in torchrun for tee in ("rank0", "all")] == [None] * 6


def test_a_commands_own_log_is_rank_0s_unless_it_starts_its_own_processes(tmp_path: Path) -> None:
    from clustertune.launch.command import command_log, write_launch
    from clustertune.runs.paths import RunPaths

    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir(parents=True)
    for runner, log in (("torchrun", paths.rank_log(0)), ("srun", paths.rank_log(0)), ("none", paths.node_log(0))):
        write_launch(paths, load_launch(None, [f"launch.runner={runner}"] + (["launch.backend=slurm"] if runner == "srun"
                                                                               else [])))
        assert command_log(paths) == log, runner
