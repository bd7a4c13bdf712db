"""What is exported is what was trained (use/fidelity.py): a merged export of an SFT adapter run,
loaded back with transformers, answers the run's own held-out conversations as the trained model
does, and its card and the command say with which figures; an artifact broken on purpose (a wrong
chat template, a special token dropped from its tokenizer, a scrambled weight) is caught, and the
failure names the first difference; a failed check writes nothing; --no-check skips it. `serve`
compares what it loaded (a dtype, a merge, another template) the same way, and refuses to serve a
model that answers otherwise than it trained."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import clustertune as ct
from clustertune.cli.main import main
from clustertune.data.templates import LLAMA3
from clustertune.errors import ModelError
from clustertune.runs.state import RunState
from clustertune.use.export import export_model
from clustertune.use.fidelity import check_export
from clustertune.use.load import find_target
from tests.sft_fixtures import sft_recipe, write_jsonl

QUESTIONS = ["Which keyword starts a loop?", "What does def define?", "Count to three.", "What is a tuple?"]


@pytest.fixture(scope="module")
def run(chat_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A LoRA SFT run of the tiny chat base that learned to answer "maybe", with held-out prompts."""
    where = tmp_path_factory.mktemp("fidelity")
    rows = [{"messages": [{"role": "user", "content": f"Question {i}: {q}"}, {"role": "assistant", "content": "maybe"}]}
            for i in range(12) for q in QUESTIONS]
    recipe = sft_recipe(chat_base, write_jsonl(where / "maybe.jsonl", rows), where / "runs")
    recipe["model"] = {"name_or_path": str(chat_base), "adapter": {"type": "lora", "rank": 8, "alpha": 16}}
    recipe["train"].update(max_steps=16, lr=3e-2, eval_at_start=False, log_every=8)
    done = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert done.state is RunState.COMPLETED, done.info.reason
    return done


@pytest.fixture(scope="module")
def merged(run: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The run exported merged through the CLI, and what the command printed."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("fidelity-export") / "merged"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["export", run.id, "--to", str(out), "--merge", "--runs-root", str(run.paths.root.parent)])
    assert code in (0, None), buf.getvalue()
    return out, buf.getvalue()


def test_a_merged_export_answers_as_trained_and_its_card_and_output_say_so(run: Any, merged: tuple[Path, str]) -> None:
    out, printed = merged
    line = next(x for x in printed.splitlines() if x.startswith("answers"))
    # The run's own held-out conversations (its validation split), not stand-ins.
    assert f"held-out prompts (the validation data of run {run.id})" in line, line
    n = int(line.split("as trained: ")[1].split()[0])
    assert n >= 2 and f"template {n}/{n} equal" in line and f"tokens {n}/{n} equal" in line, line
    assert "greedy agreement 1.000" in line, line
    card = (out / "README.md").read_text()
    assert "## Checked against the trained model" in card
    assert f"renders {n} of {n} prompts identically" in card and "greedy agreement with the trained model's answers: 1.000" in card

    found = check_export(find_target(run.id, run.paths.root.parent), out, artifact="the merged model",
                         precision="float32", device="cpu")
    assert found.passed and found.prompts == n and found.answer_tokens >= n
    assert found.logprob_gap < 1e-4  # fp32 merged: the same numbers up to summation order


def _broken_template(d: Path) -> None:
    (d / "chat_template.jinja").write_text(LLAMA3)


def _dropped_token(d: Path) -> None:
    """<|im_start|> no longer one token: split by the BPE into its characters."""
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["added_tokens"] = [t for t in tj["added_tokens"] if t["content"] != "<|im_start|>"]
    (d / "tokenizer.json").write_text(json.dumps(tj))
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    for key in ("additional_special_tokens", "extra_special_tokens"):
        if isinstance(cfg.get(key), list):
            cfg[key] = [t for t in cfg[key] if t != "<|im_start|>"]
    cfg.pop("added_tokens_decoder", None)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))


def _scrambled(d: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(d / "model.safetensors"))
    name = "transformer.h.1.mlp.c_proj.weight"
    g = torch.Generator().manual_seed(0)
    weights[name] = weights[name].flatten()[torch.randperm(weights[name].numel(), generator=g)].view_as(weights[name])
    save_file(weights, str(d / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize(("breakage", "named"), [
    (_broken_template, "chat template: prompt 1 renders differently at character 3: the trained template writes "
                       "'<|im_start|>user"),
    (_dropped_token, "tokenization: prompt 1 differs at token 1 of the same text: the trained tokenizer has "
                     "'<|im_start|>'"),
    (_scrambled, "greedy agreement"),
], ids=["wrong-template", "dropped-special-token", "scrambled-tensor"])
def test_a_broken_artifact_is_caught_and_the_first_difference_named(run: Any, merged: tuple[Path, str], tmp_path: Path,
                                                                  breakage: Any, named: str) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(merged[0], copy)
    breakage(copy)
    found = check_export(find_target(run.id, run.paths.root.parent), copy, artifact="the copy", precision="float32",
                         device="cpu")
    assert not found.passed
    assert found.differences[0].startswith(named), found.differences
    if breakage is _scrambled:
        assert found.agreement < 0.9 and "first difference: prompt" in found.differences[0]


def test_a_failed_check_writes_nothing_and_no_check_skips_it(run: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    import clustertune.use.export as export

    real = export.save_pretrained

    def broken_save(model: Any, where: str) -> None:  # a writer that loses the end of every answer
        real(model, where)
        _scrambled(Path(where))

    monkeypatch.setattr(export, "save_pretrained", broken_save)
    out = tmp_path / "exports" / "merged"
    with pytest.raises(ModelError, match="does not answer as run .* does, so nothing was written") as err:
        export_model(run.id, out, runs_root=run.paths.root.parent, merge=True)
    assert "greedy agreement" in str(err.value) and "--no-check" in str(err.value)
    assert not (tmp_path / "exports").exists()  # nor the folder made for it

    code = main(["export", run.id, "--to", str(out), "--merge", "--no-check", "--runs-root", str(run.paths.root.parent)])
    assert code in (0, None)
    assert "answers   not compared with the trained model (--no-check)" in capsys.readouterr().out
    assert (out / "model.safetensors").is_file() and "## Checked against" not in (out / "README.md").read_text()


def _engine(run: Any, **options: Any) -> Any:
    """The engine `clustertune serve RUN` builds, loaded in this thread (no port, no batch wanted)."""
    from clustertune.serve.server import prepare

    engine = prepare(run.id, runs_root=run.paths.root.parent, device="cpu", **options)
    engine.load()
    return engine


def test_serve_compares_what_it_loaded_with_the_trained_model(run: Any) -> None:
    # As trained (fp32, the adapter unmerged, its own template): nothing could differ, nothing is run.
    plain = _engine(run)
    assert plain.failed is None and plain.fidelity is None
    plain.close()

    # Merged and in bf16: compared on the run's held-out prompts, and served.
    halved = _engine(run, dtype="bf16", merge=True)
    assert halved.failed is None, halved.failed
    found = halved.fidelity
    assert found.passed and found.artifact == "the served model (bfloat16, merged)"
    assert found.source == f"the validation data of run {run.id}" and found.agreement >= 0.9
    assert 0 < found.logprob_gap < 0.1  # bf16's rounding shows, and no more
    halved.close()

    # Another chat template than the one it trained with: refused, the difference named.
    other = _engine(run, template="llama3")
    assert other.gen is None and other.failed is not None
    assert f"does not answer as run {run.id} does, so it is not served" in other.failed
    assert "chat template: prompt 1 renders differently" in other.failed and "--no-check" in other.failed
    other.close()

    unchecked = _engine(run, template="llama3", check=False)
    assert unchecked.failed is None and unchecked.fidelity is None
    unchecked.close()


def test_the_server_says_what_the_check_found_once_ready(run: Any) -> None:
    import threading

    from clustertune.api import serving

    server = serving.start(run.id, port=0, runs_root=run.paths.root.parent, device="cpu", dtype="bf16")
    seen: list[Any] = []
    thread = threading.Thread(target=server.run, kwargs={"on_ready": seen.append}, daemon=True)
    thread.start()
    try:
        assert server.wait_loaded(120), server.engine.failed
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:  # on_ready is called just after loading ends
            time.sleep(0.05)
        assert seen and seen[0].checked is not None
        assert f"held-out prompts (the validation data of run {run.id})" in seen[0].checked
        assert "greedy agreement" in seen[0].checked
    finally:
        server.stop()
        thread.join(30)
