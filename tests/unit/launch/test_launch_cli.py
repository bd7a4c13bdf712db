"""Launch commands at the edges: dry runs, bad input, the launcher's light imports, the watchdog."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clustertune.errors import LaunchError, RecipeError, UserError
from clustertune import api
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CAUSAL, cli_here, with_


@pytest.fixture
def recipe_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_CAUSAL))
    return path


def test_dry_run_prints_the_sbatch_script_and_starts_nothing(recipe_file: Path, runs_root: Path) -> None:
    out = cli_here("run", str(recipe_file), "launch.backend=slurm", "launch.nodes=2", "launch.time=01:00:00", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --nodes=2" in out.stdout and "#SBATCH --time=01:00:00" in out.stdout
    assert "srun --kill-on-bad-exit=1" in out.stdout and '"nodes": 2' in out.stdout
    assert not runs_root.exists()


def test_dry_run_of_a_local_multi_process_run_prints_the_torchrun_command(recipe_file: Path, runs_root: Path) -> None:
    out = cli_here("run", str(recipe_file), "launch.procs_per_node=2", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "torch.distributed.run" in out.stdout and "--nproc-per-node=2" in out.stdout and "--standalone" in out.stdout
    assert not runs_root.exists()


@pytest.mark.parametrize(("args", "says"), [
    (["launch.nodes=0"], "launch.nodes"),
    (["launch.backend=slurm", 'launch.partition="gpu\\nrm -rf /"', "--dry-run"], "line break"),
    (["launch.procs_per_node=4096"], "procs_per_node=4096"),
])
def test_bad_launch_input_exits_2_without_traceback(recipe_file: Path, runs_root: Path, args: list[str], says: str) -> None:
    out = cli_here("run", str(recipe_file), *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert not runs_root.exists() or not any(runs_root.iterdir())


@pytest.mark.parametrize("command", ["cancel", "logs", "status"])
def test_unknown_run_id_exits_2(runs_root: Path, command: str) -> None:
    out = cli_here(command, "no-such-run")
    assert out.returncode == 2 and "no run 'no-such-run'" in out.stderr and "Traceback" not in out.stderr


def test_slurm_backend_without_sbatch_says_so_before_creating_a_run(runs_root: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(LaunchError, match="sbatch.*not on PATH"):
        api.run(load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm"})))
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_the_launching_process_imports_neither_torch_nor_transformers() -> None:
    code = ("import sys, clustertune.cli.main, clustertune.launch.submit, clustertune.launch.local, "
            "clustertune.launch.slurm, clustertune.launch.backends as b; [b.launcher(n) for n in b.BACKENDS]; "
            "heavy = [m for m in ('torch', 'transformers', 'accelerate', 'datasets') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_watchdog_dumps_every_stack_and_fails_a_rank_that_stops_stepping(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    code = f"""
import time
from clustertune.train.stop import StopFlag
fh = open({str(log)!r}, "a")
flag = StopFlag(None, watchdog_seconds=1.0, watchdog_log=fh)
for _ in range(5):
    time.sleep(0.1)
    flag.beat()
def stuck_in_a_collective():
    time.sleep(60)
stuck_in_a_collective()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    text = log.read_text()
    assert "stuck_in_a_collective" in text and "Thread" in text


def test_stop_file_request_is_seen_with_its_signal(tmp_path: Path) -> None:
    from clustertune.train.stop import StopFlag

    stop_file = tmp_path / "stop-request"
    flag = StopFlag(stop_file, install_handlers=False)
    assert not flag.local()
    stop_file.write_text("USR2\n")
    assert flag.local() and flag.requested_by == "SIGUSR2 via stop-request"


@pytest.mark.parametrize(("command", "overrides", "says"), [
    ([], [], "give the command to run after `--`"),
    (["python", "train.py"], ["train.lr=3e-4"], "only launch.\\* keys apply to your own script"),
    (["python", "train.py"], ["launch.watchdog_minutes=5"], "watchdog"),
    (["python", "train.py"], ["launch.runner=none", "launch.procs_per_node=2"], "starts its own"),
    (["python", "train.py"], ["launch.backend=ssh", "launch.cluster=no-such-cluster"], "no cluster 'no-such-cluster'"),
    (["python", "train.py"], ["launch.runner=sometimes"], "launch.runner"),
    # A program that starts the ranks itself, under torchrun, would be started once per rank.
    (["mpirun", "-np", "4", "python", "train.py"], [], "`mpirun ...` starts the ranks itself.*launch.runner=srun"),
    (["/usr/bin/srun", "python", "train.py"], [], "`srun ...` starts the ranks itself.*launch.runner=none"),
    (["accelerate", "launch", "train.py"], ["launch.runner=torchrun"], "`accelerate ...`.*launch.runner=none runs"),
])
def test_a_users_own_command_with_bad_input_is_refused_before_anything_is_written(
        runs_root: Path, command: list[str], overrides: list[str], says: str) -> None:
    with pytest.raises(UserError, match=says):
        api.launch_command(command, None, overrides=overrides, runs_root_dir=runs_root)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_a_recipe_never_runs_without_torchrun(recipe_file: Path, runs_root: Path) -> None:
    with pytest.raises(RecipeError, match="launch.runner: none applies to your own command"):
        api.run(load_recipe(recipe_file, ["launch.runner=none"]), runs_root_dir=runs_root)
