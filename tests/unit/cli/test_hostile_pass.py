"""What a pass of hostile input over the newer commands found: each case exits 2 with one
message naming the flag, key or path and the fix, no traceback, and nothing lost (no run
deleted, no cluster saved, no answer computed only to be thrown away at the end).

Every case runs the CLI's ``main()`` in this process (``cli_here``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers import TINY_CLS, cli_here, tree_snapshot, with_


def refused(tmp_path: Path, *args: str, says: list[str], cwd: Path | None = None) -> str:
    """``clustertune ARGS`` with runs and clusters under ``tmp_path``: exit 2, every piece of
    ``says`` in the message, no traceback; the message."""
    env = {"CLUSTERTUNE_RUNS": str(tmp_path / "runs"), "CLUSTERTUNE_CONFIG_DIR": str(tmp_path / "cfg"),
           "HF_HUB_OFFLINE": "1"}
    out = cli_here(*args, cwd=cwd or tmp_path, env=env)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    for piece in says:
        assert piece in out.stderr, (piece, out.stderr)
    return out.stderr


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer GPT-2 with a small BPE tokenizer, saved as save_pretrained writes it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.models.tokenizer import train_bpe

    d = tmp_path_factory.mktemp("model") / "m"
    tok = train_bpe([f"line {i} of some text" for i in range(40)], 300, classification=False, model_max_length=32)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=1, n_embd=16, n_head=2, n_positions=32)).save_pretrained(d)
    tok.save_pretrained(str(d))
    return d


def a_run(tmp_path: Path) -> str:
    """One COMPLETED run under ``tmp_path / "runs"`` (its state set by hand); its id."""
    from clustertune.runs.run import Run
    from clustertune.runs.state import RunState

    run = Run.create(tmp_path / "runs", "done", "causal_lm", "name: done\n", ["test"])
    run.start_attempt()
    run.transition(RunState.COMPLETED)
    return run.id


# generate / eval / export: a flag's value refused before a model loads or an answer is computed

def test_generate_refuses_a_seed_numpy_cannot_take(tmp_path: Path) -> None:
    refused(tmp_path, "generate", "nope", "hi", "--seed", "-5", says=["--seed -5", "from 0 to 4294967295"])


def test_generate_names_a_prompts_file_that_is_not_utf8(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    refused(tmp_path, "generate", "nope", "--input", str(prompts),
            says=[f"--input {prompts}: not UTF-8 text (line 2)", "saved as UTF-8"])


def test_generate_refuses_a_directory_as_output_before_generating(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    refused(tmp_path, "generate", "nope", "hi", "--output", str(tmp_path / "out"),
            says=[f"--output {tmp_path / 'out'}: a directory is there", "name a file"])


@pytest.mark.parametrize(("extra", "says"), [
    (["--batch-size", "0"], "--batch-size 0: use a positive count"),
    (["--tasks", "arc_easy", "--limit", "0"], "--limit 0: use a count of examples per task"),
    (["--tasks", "arc_easy", "--num-fewshot", "-2"], "--num-fewshot -2: use 0 (zero-shot) or a positive count"),
    (["--output", "{d}"], "--output {d}: a directory is there; name a file"),
    (["--output", "{d}/no-dir/r.json"], "--output {d}/no-dir/r.json: its directory {d}/no-dir does not exist"),
], ids=["batch-size-0", "limit-0", "negative-fewshot", "output-a-directory", "output-in-a-missing-directory"])
def test_eval_refuses_bad_options_before_it_evaluates(tmp_path: Path, extra: list[str], says: str) -> None:
    d = str(tmp_path)
    refused(tmp_path, "eval", "nope", *[a.replace("{d}", d) for a in extra], says=[says.replace("{d}", d)])


def test_eval_names_an_empty_data_file(tmp_path: Path, tiny_model: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    refused(tmp_path, "eval", str(tiny_model), "--data", str(tmp_path / "empty.jsonl"), "--device", "cpu",
            says=[f"'{tmp_path / 'empty.jsonl'}' is empty", "give files that hold examples"])


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no directory can be made")
def test_export_names_a_destination_where_nothing_can_be_made(tmp_path: Path, tiny_model: Path) -> None:
    refused(tmp_path, "export", str(tiny_model), "--to", "/proc/ct-export",
            says=["--to /proc/ct-export: cannot write the export there", "is /proc a writable directory"])


# run ids: a checkpoint or glob characters where a whole run goes

@pytest.mark.parametrize("command", [["status"], ["logs"], ["cancel"], ["runs", "rm"]])
def test_a_checkpoint_where_a_run_goes_is_named_as_one(tmp_path: Path, command: list[str]) -> None:
    run_id = a_run(tmp_path)
    before = tree_snapshot(tmp_path / "runs")
    refused(tmp_path, *command, f"{run_id}@step-2",
            says=[f"'{run_id}@step-2' names a checkpoint (step-2) of run '{run_id}'", f"run id alone ('{run_id}')"])
    assert tree_snapshot(tmp_path / "runs") == before


def test_glob_characters_in_a_run_id_delete_nothing(tmp_path: Path) -> None:
    run_id = a_run(tmp_path)
    refused(tmp_path, "runs", "rm", "*", says=["no run '*' under"])
    assert (tmp_path / "runs" / run_id / "run.json").is_file()


# clusters and recipes

@pytest.mark.parametrize(("hosts", "says"), [
    (["[::1"], "host address '[::1' is not a host name or IP address"),
    (["gpu1", "gpu2", "gpu1"], "host gpu1 is given twice; name each host once"),
], ids=["unbalanced-ipv6-bracket", "same-host-twice"])
def test_cluster_add_refuses_and_saves_nothing(tmp_path: Path, hosts: list[str], says: str) -> None:
    refused(tmp_path, "cluster", "add", "c1", *hosts, says=[says])
    assert not (tmp_path / "cfg" / "clusters.yaml").exists()


def test_a_device_as_the_recipe_is_not_called_a_directory(tmp_path: Path) -> None:
    err = refused(tmp_path, "validate", "/dev/null", says=["recipe '/dev/null' is not a regular file; give a YAML file"])
    assert "directory" not in err


# data files

def test_a_field_of_two_kinds_is_named_by_line(tmp_path: Path) -> None:
    rows = [{"text": f"example {i}", "label": i % 2, "meta": "plain"} for i in range(39)]
    rows.append({"text": "example 39", "label": 1, "meta": [{"type": "text", "text": "parts"}]})
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CLS, data={"dataset": None, "train_files": [str(data)]})))
    refused(tmp_path, "prepare", str(recipe), "--cache-dir", str(tmp_path / "cache"),
            says=[f"data.train_files: cannot read '{data}': line 40: meta is a list, but text on line 1",
                  "every row must give a field the same kind of value"])
