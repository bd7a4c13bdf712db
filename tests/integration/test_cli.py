"""The command line: user errors exit 2 with one clear message (traceback only with --debug),
nothing is written for a bad recipe, and the run commands work on a real run.

Most bad-input cases run in-process through the API (cheap); a few go through the real
console script to check exit codes and output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import clustertune as ct
from clustertune.errors import DataError, ModelError, RecipeError, RunError, UserError
from tests.helpers import TINY_CAUSAL, TINY_CLS, cli, tree_snapshot, with_


def _write(tmp_path: Path, data: dict, name: str = "r.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


def test_malformed_yaml_exits_2_without_traceback(tmp_path: Path, runs_root: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("model:\n  config: gpt2\n  tokenizer: [train\ndata: {}\n")
    res = cli("run", str(p))
    assert res.returncode == 2
    assert res.stderr.startswith("error: recipe has 1 problem") and "line 4, column" in res.stderr
    assert "Traceback" not in res.stderr
    assert not runs_root.exists()  # nothing written
    dbg = cli("--debug", "validate", str(p))
    assert dbg.returncode == 2 and "Traceback" in dbg.stderr


def test_validate_reports_every_problem_with_file_and_key(tmp_path: Path) -> None:
    p = _write(tmp_path, with_(TINY_CAUSAL, train={"lr": -1, "bach_size": 4}))
    res = cli("validate", str(p), "data.block_size=0")
    assert res.returncode == 2
    err = res.stderr
    assert "recipe has 3 problems" in err
    assert f"{p}:" in err and "train.lr: Input should be greater than 0" in err
    assert "did you mean 'train.batch_size'?" in err
    assert "<override data.block_size=0>: data.block_size" in err
    ok = cli("validate", "quickstart", "train.lr=3e-4")
    assert ok.returncode == 0 and ok.stdout.startswith("ok: ")


def test_unknown_recipe_and_run_ids(runs_root: Path) -> None:
    res = cli("run", "quickstrat")
    assert res.returncode == 2 and "Did you mean 'quickstart'?" in res.stderr and "pydoc-kinds" in res.stderr
    for args in (["run", "--resume", "nope-123"], ["logs", "nope-123"], ["status", "nope-123"],
                 ["cancel", "nope-123"], ["runs", "show", "nope-123"]):
        r = cli(*args)
        assert r.returncode == 2, args
        assert "no run 'nope-123'" in r.stderr and "Traceback" not in r.stderr, args


def test_recipes_lists_every_shipped_recipe() -> None:
    res = cli("recipes")
    assert res.returncode == 0
    for name in ct.shipped_recipes():
        assert name in res.stdout


@pytest.mark.parametrize(
    "recipe,error,needle",
    [
        (with_(TINY_CAUSAL, data={"dataset": None, "train_files": ["/nonexistent/train.txt"]}), RecipeError,
         "data.train_files.0: file '/nonexistent/train.txt' does not exist"),
        (with_(TINY_CAUSAL, data={"text_column": "body"}), DataError, "data.text_column: column 'body' not in"),
        (with_(TINY_CLS, data={"label_column": "stars"}), DataError, "data.label_column: column 'stars'"),
        (with_(TINY_CAUSAL, model={"config": None, "tokenizer": None, "name_or_path": "./no/such/model"}), RecipeError,
         "model.name_or_path: directory './no/such/model' does not exist"),
        (with_(TINY_CAUSAL, model={"config": None, "tokenizer": None, "name_or_path": "gpt2-not-cached-here"}),
         ModelError, "HF_HUB_OFFLINE=1"),
        (with_(TINY_CAUSAL, data={"dataset": "wikitext", "dataset_config": "wikitext-2-raw-v1"}), DataError,
         "save_to_disk"),
        (with_(TINY_CAUSAL, data={"block_size": 128}), RecipeError, "data.block_size: 128 is longer than the 64 positions"),
        (with_(TINY_CAUSAL, train={"precision": "fp16"}), UserError, "fp16 needs a CUDA GPU"),
    ],
    ids=["missing-file", "text-column", "label-column", "model-path", "hub-offline",
         "hub-dataset-offline", "block-size", "fp16-cpu"],
)
def test_bad_input_is_caught_before_anything_is_written(
    recipe: dict, error: type, needle: str, runs_root: Path
) -> None:
    with pytest.raises(error) as ei:
        ct.run(ct.load_recipe(recipe), show_progress=False)
    assert needle in str(ei.value)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_labels_outside_num_labels(tmp_path: Path, runs_root: Path) -> None:
    rows = [{"text": f"example number {i}", "label": i % 4} for i in range(40)]
    f = tmp_path / "train.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = with_(TINY_CLS, data={"dataset": None, "train_files": [str(f)]})
    with pytest.raises(DataError, match=r"label 2, outside 0..1 .* model.num_labels=2"):
        ct.run(ct.load_recipe(recipe), show_progress=False)
    assert not runs_root.exists()


def test_a_failed_run_leaves_other_runs_untouched(runs_root: Path) -> None:
    good = ct.run(ct.load_recipe(with_(TINY_CAUSAL, train={"max_steps": 4, "eval_at_start": False})),
                  show_progress=False)
    before = tree_snapshot(runs_root)
    with pytest.raises(RecipeError):
        ct.run(ct.load_recipe(TINY_CAUSAL, ["train.batch_size=0"]))
    with pytest.raises(RunError, match="already COMPLETED"):
        ct.run(resume=good.id)
    assert tree_snapshot(runs_root) == before


def test_runs_show_status_logs_and_plot(runs_root: Path) -> None:
    run = ct.run(ct.load_recipe(with_(TINY_CAUSAL, train={"max_steps": 8})), show_progress=False)
    listing = cli("runs")
    assert listing.returncode == 0
    line = next(ln for ln in listing.stdout.splitlines() if run.id in ln)
    assert "causal_lm" in line and "COMPLETED" in line and " 8 " in line and "perplexity" in line

    show = cli("runs", "show", run.id[:-2], "--plot")  # a unique prefix is enough
    assert show.returncode == 0, show.stderr
    assert "state     COMPLETED" in show.stdout and "eval @ 8" in show.stdout
    png = run.paths.plot
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000

    logs = cli("logs", run.id)
    assert logs.returncode == 0 and f"run {run.id}" in logs.stdout and "eval @ step 8" in logs.stdout
    status = cli("status", run.id)
    assert status.returncode == 0 and status.stdout.strip() == f"{run.id} COMPLETED"
    cancel = cli("cancel", run.id)
    assert cancel.returncode == 2 and "already COMPLETED" in cancel.stderr


def test_usage_errors_exit_2_with_the_usage_line() -> None:
    res = cli("run", "--bogus")
    assert res.returncode == 2 and "No such option: --bogus" in res.stderr and "Traceback" not in res.stderr
    res = cli("status")
    assert res.returncode == 2 and "Missing argument" in res.stderr
