"""launch.prepare: a user's own preparing step, run once on the first node before the command
and before launch.stage copies its output to every node (the sbatch script's ``srun --ntasks=1
python prepare_data.py``): the rendered script against a golden file, the local step in-process,
and what the schema refuses. (On a real SLURM cluster: tests/integration/test_launch_script.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clustertune.api import validate
from clustertune.errors import RecipeError
from clustertune.launch.plan import build_plan
from clustertune.launch.prepare_step import run_prepare
from clustertune.launch.sbatch import render_sbatch
from clustertune.recipe.load import load_recipe
from clustertune.runs.paths import RunPaths
from tests.helpers import TINY_CAUSAL, with_
from tests.unit.launch.test_launch_plan import check_golden

COMMAND = ["python", "main.py"]  # it reads $CLUSTERTUNE_STAGED_SET, the copy on its node
# The Mila shape: prepare on shared storage once, copy to each node's local disk, train from there.
PREPARED = {"backend": "slurm", "nodes": 2, "gpus_per_node": 4, "cpus_per_task": 8, "time": "04:00:00",
            "prepare": "python prepare_data.py --out $SCRATCH/set", "stage": ["/scratch/me/set"],
            "env": {"HF_DATASETS_CACHE": "$SLURM_TMPDIR/hf"}}


def plan_of(launch: dict, command: list[str] = COMMAND, run_dir: str = "/shared/runs/main-1"):
    return build_plan(load_recipe(with_(TINY_CAUSAL, launch=launch)), "main-1", run_dir, "/opt/venv/bin/python", command)


def test_prepare_runs_once_on_the_first_node_before_the_command_and_its_stage_copies() -> None:
    plan = plan_of(PREPARED)
    assert plan.prepare == ("/bin/bash", "-c", "python prepare_data.py --out $SCRATCH/set")
    assert plan.to_dict()["prepare"] == plan.prepare
    text = render_sbatch(plan)
    check_golden("sbatch_command_prepare_stage.sh", text)
    prepare = text.index("srun --nodes=1 --ntasks=1 --relative=0 --cpus-per-task=8 ")
    train = text.index("srun --kill-on-bad-exit=1")
    # The one-task step on the first node ends before the command's step starts; the command's
    # wrapper then copies launch.stage's paths on each node, as before.
    assert prepare < text.index('touch "$CT_RUN_DIR"/prepared') < train
    assert '--output="$CT_RUN_DIR"/logs/prepare.log' in text[prepare:train]
    assert "ct-node /bin/bash -c 'python prepare_data.py --out $SCRATCH/set'" in text  # a shell line, for bash there
    assert 'if [ ! -f "$CT_RUN_DIR"/prepared ]; then' in text  # requeued and resumed attempts skip it
    # An argument list is run as it is: quoted, never interpreted.
    listed = render_sbatch(plan_of({**PREPARED, "prepare": ["python", "prep.py", "a b; rm -rf x"], "env": {}}))
    assert "--output=\"$CT_RUN_DIR\"/logs/prepare.log python prep.py 'a b; rm -rf x'\n" in listed
    # Without launch.prepare (and for a recipe) the script has no such step.
    assert "prepare" not in render_sbatch(plan_of({**PREPARED, "prepare": None})).split("# Your own command", 1)[1]
    recipe = build_plan(load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm"})), "r", "/r", "/p")
    assert recipe.prepare == () and "prepare" not in recipe.to_dict()


def _local_plan(tmp_path: Path, prepare) -> tuple:
    plan = plan_of({"prepare": prepare}, run_dir=str(tmp_path / "run"))
    return plan, RunPaths(tmp_path / "run")


def test_locally_the_step_runs_here_once_per_run_and_its_output_is_logged(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # it starts where the command does
    count = tmp_path / "count"
    line = f"echo preparing $WHERE; echo x >> {count}; mkdir -p out && echo data > out/set.txt"
    plan, paths = _local_plan(tmp_path, line)
    shown = tmp_path / "shown"
    with shown.open("w") as show:
        assert run_prepare(plan, paths, {"WHERE": "here", "PATH": "/usr/bin:/bin"}, show=show) == 0
        assert run_prepare(plan, paths, {"WHERE": "again", "PATH": "/usr/bin:/bin"}, show=show) == 0  # done before
    assert (tmp_path / "out" / "set.txt").read_text() == "data\n" and count.read_text() == "x\n"
    assert paths.prepared.is_file()
    assert paths.prepare_log.read_text() == shown.read_text() == "preparing here\n"


@pytest.mark.parametrize(("prepare", "rc", "says"), [
    ([sys.executable, "-c", "import sys; print('no input'); sys.exit(3)"], 3, "no input\n"),
    (["no-such-prepare-command-ct"], 127, "cannot start launch.prepare 'no-such-prepare-command-ct'"),
])
def test_locally_a_failing_step_stops_the_run_and_says_so(tmp_path: Path, prepare: list[str], rc: int, says: str) -> None:
    plan, paths = _local_plan(tmp_path, prepare)
    assert run_prepare(plan, paths, {"PATH": "/usr/bin:/bin"}, show=None) == rc
    assert says in paths.prepare_log.read_text() and not paths.prepared.exists()
    assert f"clustertune: launch.prepare failed with code {rc} (logs/prepare.log)" in paths.node_log(0).read_text()


def test_prepare_is_refused_where_it_does_not_apply() -> None:
    for empty in ("  ", []):
        with pytest.raises(RecipeError, match="launch.prepare: .*give the command to run"):
            load_recipe(with_(TINY_CAUSAL, launch={"prepare": empty}))
    with pytest.raises(RecipeError, match="launch.prepare: runs once, on the first node, with launch.backend slurm or local"):
        load_recipe(with_(TINY_CAUSAL, launch={"backend": "ssh", "cluster": "c", "prepare": "python p.py"}))
    # A recipe's data is clustertune's to prepare.
    with pytest.raises(RecipeError) as ei:
        validate(with_(TINY_CAUSAL, launch={"prepare": "python p.py"}))
    assert any(p.key == "launch.prepare" and "launch.prepare_data" in p.message for p in ei.value.problems)
