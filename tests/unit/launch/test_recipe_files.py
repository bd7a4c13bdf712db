"""The local paths a recipe names: found beside the recipe, then here; checked before a run
exists; and given to the nodes in the way each backend needs (no cluster here: the placement
itself, the run directory and run.json; the real SSH and SLURM runs are integration tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from clustertune import api
from clustertune.errors import LaunchError, RecipeError
from clustertune.launch.files import (IN_PLACE, PREPARED_HERE, SHIPPED, SNAPSHOT, decide, describe, for_nodes, link_into,
                                      stored_copies)
from clustertune.recipe.load import load_recipe
from clustertune.runs.run import Run
from tests.helpers import TINY_CAUSAL, with_


def _project(root: Path) -> Path:
    """A user's folder: a (stand-in) model directory, a DeepSpeed JSON, a setup script."""
    model = root / "distgpt2"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "gpt2"}')
    (model / "model.safetensors").write_bytes(os.urandom(4096))
    (model / ".git").mkdir()
    (model / ".git" / "big-lfs-object").write_bytes(b"x" * 1000)
    (root / "ds_config.json").write_text(json.dumps({"zero_optimization": {"stage": 1}}))
    (root / "setup.sh").write_text("export FROM_SETUP=1\n")
    (root / "train.txt").write_text("some text\n" * 50)
    return root


def _recipe(proj: Path, **launch_keys: object) -> dict:
    return with_(TINY_CAUSAL, model={"name_or_path": "./distgpt2", "config": None, "tokenizer": None},
                 data={"dataset": None, "train_files": ["./train.txt"]},
                 train={"strategy": "deepspeed", "deepspeed_config": "./ds_config.json"},
                 launch={"files": ["./setup.sh"], **launch_keys})


def test_relative_paths_start_beside_the_recipe_then_here_and_a_missing_one_is_named(tmp_path, monkeypatch):
    proj = _project(tmp_path / "proj")
    (proj / "r.yaml").write_text(yaml.safe_dump(_recipe(proj)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "only-here.sh").write_text("true\n")
    monkeypatch.chdir(elsewhere)
    checked = api.validate(str(proj / "r.yaml"), ["launch.files=[./setup.sh,./only-here.sh]"])
    r = checked.recipe
    assert r.model.name_or_path == str(proj / "distgpt2")
    assert r.train.deepspeed_config == str(proj / "ds_config.json")
    assert r.data.train_files == [str(proj / "train.txt")]
    assert r.launch.files == [str(proj / "setup.sh"), str(elsewhere / "only-here.sh")]
    # What a tired user types: a file that is nowhere, and two files of the same name.
    (elsewhere / "sub").mkdir()
    (elsewhere / "sub" / "setup.sh").write_text("true\n")
    with pytest.raises(RecipeError) as err:
        api.validate(str(proj / "r.yaml"), ["launch.files=[./setup.sh,./sub/setup.sh,./nope.sh]",
                                            "train.deepspeed_config=./ds.json"])
    text = str(err.value)
    assert "launch.files.1: './sub/setup.sh' has the same name ('setup.sh') as launch.files.0" in text
    assert "launch.files.2: './nope.sh' does not exist (relative paths start beside the recipe" in text
    assert "train.deepspeed_config: file './ds.json' does not exist" in text
    assert err.value.exit_code == 2


def test_a_missing_path_stops_a_launch_before_the_run_directory_exists(tmp_path):
    runs = tmp_path / "runs"
    recipe = load_recipe(with_(TINY_CAUSAL, tracking={"runs_root": str(runs)},
                               launch={"files": [str(tmp_path / "gone.sh")]}))
    with pytest.raises(RecipeError, match=r"launch\.files\.0: .*gone\.sh' does not exist"):
        api.run(recipe, show_progress=False)
    recipe = load_recipe(with_(TINY_CAUSAL, tracking={"runs_root": str(runs)},
                               data={"dataset": None, "train_files": [str(tmp_path / "gone.txt")]}))
    with pytest.raises(RecipeError, match=r"data\.train_files\.0: file .*gone\.txt' does not exist"):
        api.run(recipe, show_progress=False)
    assert not runs.exists() or not list(runs.iterdir())


def _new_run(tmp_path: Path, recipe) -> Run:
    from clustertune.recipe.load import dump_recipe

    return Run.create(tmp_path / "runs", recipe.name, recipe.task, dump_recipe(recipe), ["test"], backend="slurm")


def place(recipe, run: Run, backend: str, cache: Path, nodes_read_data: bool):
    """What a start does with a new run's files, in its order: decided, copied into the store,
    recorded in run.json and linked into the run; returns the recipe the nodes read."""
    placed = stored_copies(decide(recipe, backend, run.paths.root, cache, nodes_read_data), run.paths.root, cache)
    if placed:
        run.set_files([p.to_json() for p in placed])
    link_into(run, placed, backend, cache, new=True)
    return for_nodes(recipe, placed)


def test_slurm_snapshots_into_the_run_directory_unless_the_nodes_see_the_path(tmp_path):
    proj = _project(tmp_path / "proj")
    cache = tmp_path / "cache"
    recipe = api.validate(_write(proj, _recipe(proj, backend="slurm"))).recipe
    plan = decide(recipe, "slurm", tmp_path / "runs" / "x", cache, nodes_read_data=True)
    assert {p.key: p.how for p in plan} == {"model.name_or_path": SNAPSHOT, "data.train_files.0": SNAPSHOT,
                                           "train.deepspeed_config": SNAPSHOT, "launch.files.0": SNAPSHOT}
    lines = describe(plan, "slurm")
    assert any(line.startswith(f"# model.name_or_path: {proj / 'distgpt2'} (") and "snapshotted into the run directory"
               in line for line in lines), lines
    assert any("launch.files.0" in line and "on the nodes as files/setup.sh" in line for line in lines), lines

    run = _new_run(tmp_path, recipe)
    placed = place(recipe, run, "slurm", cache, nodes_read_data=True)
    snap = Path(placed.model.name_or_path)
    assert snap.parent.parent == run.paths.snapshots and snap.name == "distgpt2"
    assert (snap / "config.json").read_text() == '{"model_type": "gpt2"}'
    assert not (snap / ".git").exists()  # version control internals never travel
    # The snapshot is hard-linked from the store's own copy, never from the user's file.
    store_copy = cache / "files" / snap.parent.name / "distgpt2" / "model.safetensors"
    assert (snap / "model.safetensors").stat().st_ino == store_copy.stat().st_ino
    assert (snap / "model.safetensors").stat().st_ino != (proj / "distgpt2" / "model.safetensors").stat().st_ino
    # The user edits a file in place after submitting: the run's copies keep what was submitted.
    before = Path(placed.train.deepspeed_config).read_text()
    (proj / "ds_config.json").write_text("{broken")
    assert Path(placed.train.deepspeed_config).read_text() == before
    # launch.files by name in the run's files/ folder.
    assert (run.paths.files / "setup.sh").read_text() == "export FROM_SETUP=1\n"
    info = json.loads(run.paths.run_json.read_text())
    rec = {d["key"]: d for d in info["files"]}
    assert rec["model.name_or_path"]["path"] == str(proj / "distgpt2")
    assert rec["model.name_or_path"]["digest"] == snap.parent.name
    assert rec["model.name_or_path"]["bytes"] == 4096 + len('{"model_type": "gpt2"}')

    # A site's shared prefix: read in place, nothing copied.
    (proj / "ds_config.json").write_text(before)
    shared = recipe.model_copy(update={"launch": recipe.launch.model_copy(update={"node_visible": [str(tmp_path)]})})
    run2 = _new_run(tmp_path, shared)
    placed2 = place(shared, run2, "slurm", cache, nodes_read_data=True)
    assert placed2.model.name_or_path == str(proj / "distgpt2")
    assert not run2.paths.snapshots.exists()
    assert {d["how"] for d in json.loads(run2.paths.run_json.read_text())["files"]} == {IN_PLACE}


def test_ssh_names_the_store_copy_and_local_runs_read_in_place(tmp_path):
    proj = _project(tmp_path / "proj")
    cache = tmp_path / "cache"
    recipe = api.validate(_write(proj, _recipe(proj, backend="ssh", cluster="c"))).recipe
    run = _new_run(tmp_path, recipe)
    placed = place(recipe, run, "ssh", cache, nodes_read_data=False)
    # The data is prepared here; the model, the JSON and the setup file go to the hosts.
    hows = {d["key"]: d["how"] for d in run.info.files}
    assert hows == {"model.name_or_path": SHIPPED, "data.train_files.0": PREPARED_HERE,
                    "train.deepspeed_config": SHIPPED, "launch.files.0": SHIPPED}
    assert Path(placed.model.name_or_path).is_relative_to(cache / "files")
    assert placed.data.train_files == [str(proj / "train.txt")]
    assert not run.paths.files.exists()  # the hosts get their files/ folder when the run reaches them
    # A second run of the same files copies nothing into the store.
    store = sorted((cache / "files").iterdir())
    stamps = {p: p.stat().st_mtime_ns for p in store}
    place(recipe, _new_run(tmp_path, recipe), "ssh", cache, nodes_read_data=False)
    assert {p: p.stat().st_mtime_ns for p in sorted((cache / "files").iterdir())} == stamps

    local = recipe.model_copy(update={"launch": recipe.launch.model_copy(update={"backend": "local"})})
    run3 = _new_run(tmp_path, local)
    assert place(local, run3, "inprocess", cache, nodes_read_data=True).model.name_or_path == str(proj / "distgpt2")
    assert os.readlink(run3.paths.files / "setup.sh") == str(proj / "setup.sh")


def _write(proj: Path, recipe: dict) -> str:
    path = proj / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


def test_a_commands_dry_run_reads_its_launch_file_as_the_launch_does(tmp_path, monkeypatch):
    """`clustertune launch launch.yaml --dry-run -- CMD` is decided as the launch itself: the
    file's relative `launch.files` start beside it, and a missing one is refused, not planned."""
    proj = _project(tmp_path / "proj")
    (proj / "launch.yaml").write_text(yaml.safe_dump({"name": "job", "launch": {"files": ["./setup.sh"]}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runs = tmp_path / "runs"
    text = api.dry_run(str(proj / "launch.yaml"), [], runs_root_dir=runs, user_command=["python", "train.py"])
    assert f"# launch.files.0: {proj / 'setup.sh'} " in text
    (proj / "setup.sh").unlink()
    with pytest.raises(LaunchError, match=r"launch\.files\.0: .*setup\.sh' does not exist"):
        api.dry_run(str(proj / "launch.yaml"), [], runs_root_dir=runs, user_command=["python", "train.py"])
    assert not runs.exists()
