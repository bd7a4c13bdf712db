"""Finding your way without the source: --version, -h, init, schema, recipes NAME,
validate --explain, --debug after the command, shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import clustertune
from clustertune.cli.main import main
from clustertune.recipe.load import shipped_recipes
from clustertune.recipe.starters import STARTERS
from tests.helpers import cli, cli_here


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_version_and_short_help_at_the_top_and_on_commands(capsys: pytest.CaptureFixture[str]) -> None:
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"clustertune {clustertune.__version__}"
    for args in (["-h"], ["runs", "show", "-h"], ["schema", "-h"], ["cache", "-h"]):
        rc, out, _ = _run(capsys, *args)
        assert rc == 0 and "Usage: clustertune" in out and "--help" in out, args


def test_debug_is_read_after_the_command_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    rc, _, err = _run(capsys, "validate", missing)
    assert rc == 2 and "Traceback" not in err and "missing.yaml" in err
    rc, _, err = _run(capsys, "validate", missing, "--debug")
    assert rc == 2 and "Traceback" in err and "RecipeNotFound" in err


@pytest.mark.parametrize("task", ["causal_lm", "classification", "sft", "rlhf", "dpo", "kto"])
def test_init_writes_a_commented_recipe_that_validates(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       task: str) -> None:
    path = tmp_path / "new" / f"{task}.yaml"
    rc, out, err = _run(capsys, "init", "--task", task, str(path))
    assert rc == 0, err
    assert f"wrote {path}" in out
    text = path.read_text()
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) > 10
    rc, out, err = _run(capsys, "validate", str(path))
    assert rc == 0, err
    expected = {"classification": "sequence_classification", "dpo": "rlhf", "kto": "rlhf"}.get(task, task)
    assert out.startswith(f"ok: {path}: {expected},")
    # every key the file sets has its doc in a comment right above it
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() and len(line) - len(line.lstrip()) in (0, 2) and not line.lstrip().startswith(("#", "-")):
            assert lines[i - 1].lstrip().startswith("#"), line


def test_init_keeps_an_existing_file_unless_forced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text("mine\n")
    rc, _, err = _run(capsys, "init", str(path))
    assert rc == 2 and f"{path} already exists" in err and "--force" in err and "Traceback" not in err
    assert path.read_text() == "mine\n"
    rc, _, err = _run(capsys, "init", "--task", "nonsense", str(tmp_path / "x.yaml"))
    assert rc == 2 and "no starter for task 'nonsense'" in err and ", ".join(STARTERS) in err
    assert not (tmp_path / "x.yaml").exists()
    rc, _, err = _run(capsys, "init", str(tmp_path / "x.txt"))
    assert rc == 2 and "should end in .yaml" in err and not (tmp_path / "x.txt").exists()
    done = cli("init", str(path), "--force")  # the installed entry point, end to end
    assert done.returncode == 0, done.stderr
    assert cli_here("validate", str(path)).returncode == 0
    assert path.read_text().startswith("# A small GPT-2-style language model")


def test_schema_prints_keys_with_type_default_and_doc(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "schema", "train.lr")
    assert rc == 0
    assert out.splitlines()[0].split() == ["train.lr", "float", "(>", "0.0),", "default", "5e-05"]
    assert "Peak learning rate." in out
    rc, out, _ = _run(capsys, "schema", "data.sft", "--json")
    rows = json.loads(out)
    assert rows[0] == {"key": "data.sft", "type": "section", "default": None, "section": True, "required": False,
                       "doc": rows[0]["doc"]}
    packing = next(r for r in rows if r["key"] == "data.sft.packing")
    assert packing["type"] == "bool" and packing["default"] is False and "several examples" in packing["doc"]
    rc, out, _ = _run(capsys, "schema", "--json")
    assert {"name", "train.lr", "launch.backend", "rl.rewards[].function"} <= {r["key"] for r in json.loads(out)}


def test_schema_refuses_an_unknown_key_with_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    for key, says in (("learning_rate", "did you mean 'train.lr'?"), ("trian", "did you mean 'train'?"),
                      ("train.batchsize", "did you mean 'train.batch_size'")):
        rc, out, err = _run(capsys, "schema", key)
        assert rc == 2 and f"no recipe key '{key}'" in err and says in err and "Traceback" not in err, err
        assert out == ""


def test_json_schema_command_writes_what_is_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "schema", "--json-schema")
    assert rc == 0
    shipped = shipped_recipes()["quickstart"].with_name("recipe.schema.json")
    assert json.loads(out) == json.loads(shipped.read_text())
    rc, _, err = _run(capsys, "schema", "train", "--json-schema")
    assert rc == 2 and "--json-schema" in err


def test_recipes_name_prints_the_recipe_and_its_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = shipped_recipes()["quickstart"]
    rc, out, _ = _run(capsys, "recipes", "quickstart")
    assert rc == 0
    assert out.splitlines()[0] == f"# {path}" and out.split("\n", 1)[1] == path.read_text()
    (tmp_path / "mine.yaml").write_text(out)  # redirected into a file, it is a recipe
    rc, _, err = _run(capsys, "validate", str(tmp_path / "mine.yaml"))
    assert rc == 0, err
    rc, out, err = _run(capsys, "recipes", "quikstart")
    assert rc == 2 and "Did you mean 'quickstart'?" in err and out == ""


def test_validate_explain_lists_the_keys_a_recipe_sets(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "validate", "quickstart", "train.lr=0.002", "--explain")
    assert rc == 0
    assert "\ntrain.lr = 0.002  (default 5e-05)\n    Peak learning rate.\n" in out
    assert "train.adam_beta1" not in out  # left at its default


def test_shell_completion_shows_installs_and_completes(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).with_name("clustertune"))
    # The shell named, as a user copying the line from --help does. Typer otherwise looks for a
    # shell among the process's ancestors and ignores the name; a test's ancestors need not
    # include one (a suite started in the background by a process that has exited has none), so
    # its detection is turned off and the name given is the one used.
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run(["bash", "-c", f"{exe} --show-completion bash"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and "_CLUSTERTUNE_COMPLETE=complete_bash" in shown.stdout, shown.stderr
    installed = subprocess.run(["bash", "-c", f"{exe} --install-completion bash"], env=env, capture_output=True,
                               text=True)
    assert installed.returncode == 0, installed.stderr
    assert "clustertune" in (tmp_path / ".bashrc").read_text()

    def complete(words: str) -> list[str]:
        done = cli(env={"_CLUSTERTUNE_COMPLETE": "complete_bash", "COMP_WORDS": words,
                        "COMP_CWORD": str(len(words.split(" ")) - 1), "CLUSTERTUNE_RUNS": str(tmp_path / "runs")},
                   cwd=tmp_path)
        return done.stdout.split()

    (tmp_path / "mine.yaml").write_text("task: causal_lm\n")
    (tmp_path / "configs").mkdir()
    assert complete("clustertune ru") == ["run", "runs"]
    assert complete("clustertune validate quick") == ["quickstart"]
    assert complete("clustertune run mi") == ["mine.yaml"] and complete("clustertune run ./co") == ["./configs/"]
    assert complete("clustertune schema train.lr") == ["train.lr", "train.lr_scheduler"]
    assert complete("clustertune status ") == ["last"]
    # Overrides after a recipe complete as key=, on every command that takes them.
    assert complete("clustertune run quickstart train.lr") == ["train.lr=", "train.lr_scheduler="]
    assert complete("clustertune validate mine.yaml model.rev") == ["model.revision="]
    assert complete("clustertune estimate-memory quickstart train.optim") == ["train.optimizer="]
    assert complete("clustertune run quickstart train.lr=3") == []
    # Models: run ids, then directories; launch items: launch.* keys and YAML files.
    assert complete("clustertune generate ") == ["last", "configs/"]
    assert complete("clustertune chat ./co") == ["./configs/"]
    assert complete("clustertune export la") == ["last"]
    assert complete("clustertune serve last launch.back") == ["launch.backend="]
    assert complete("clustertune launch launch.nodes") == ["launch.nodes="]
    assert complete("clustertune launch mi") == ["mine.yaml"]
