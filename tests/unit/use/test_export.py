"""`export`: directories that transformers.pipeline and PEFT load as they are, the same model
as the run's (greedy tokens, logits, labels), dtype conversion, and atomic writes with typed
errors for destinations that cannot be used."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from clustertune.cli.main import main
from clustertune.data.templates import CHATML
from clustertune.errors import ModelError
from clustertune.runs.run import Run
from clustertune.use.export import export_model
from tests.helpers import tree_snapshot
from tests.sft_fixtures import MARKERS, arithmetic_rows, sft_recipe, write_jsonl

SUMMARY = {"steps": 6, "final_eval": {"loss": 2.5021, "perplexity": 12.21}, "tokens_per_s": 812.4, "train_seconds": 3.2}


@pytest.fixture(scope="module")
def base(sft_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's tiny base (chat markers as tokens), with ChatML as its own template."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("export-base") / "tiny-chat-base"
    shutil.copytree(sft_base, out)
    tok = AutoTokenizer.from_pretrained(str(out))
    tok.chat_template = CHATML
    tok.save_pretrained(str(out))
    return out


def make_run(root: Path, base: Path, model_dir: Path) -> Run:
    """A finished SFT run on ``base`` whose final model is a copy of ``model_dir``."""
    train = write_jsonl(root.parent / "train.jsonl", arithmetic_rows(8))
    run = Run.create(root, "tinysft", "sft", yaml.safe_dump(sft_recipe(base, train)), ["clustertune", "run"])
    shutil.copytree(model_dir, run.paths.model)
    run.paths.summary.write_text(json.dumps(SUMMARY))
    return run


@pytest.fixture(scope="module", params=[["c_attn"], ["c_attn", "wte"]], ids=["linear", "tied-embedding"])
def adapter(base: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A LoRA adapter on ``base`` with non-zero weights, saved with the base's tokenizer: on a
    linear layer, and also on the input embedding, which the base ties to its output layer."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base)),
                           LoraConfig(r=4, target_modules=request.param, fan_in_fan_out=True, init_lora_weights=False))
    out = tmp_path_factory.mktemp("export-adapter") / "adapter"
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(str(out))
    return out


def _greedy(model: Any, ids: torch.Tensor, n: int) -> list[int]:
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=0)[0].tolist()


def _logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits.float()


def test_a_run_exports_as_a_pipeline_directory_with_the_same_greedy_tokens(base: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    run = make_run(tmp_path / "runs", base, base)
    out = tmp_path / "exports" / "chat"
    done = export_model(run.id[:14], out, runs_root=tmp_path / "runs")
    assert done.path == out.resolve() and done.kind == "model" and done.dtype == "float32"
    assert set(done.files) >= {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
                               "chat_template.jinja", "generation_config.json", "README.md"}
    assert sorted(p.name for p in out.parent.iterdir()) == ["chat"]  # no temporary left beside it
    # Readable as this user's other new files are (safetensors itself writes 0600).
    umask = os.umask(0)
    os.umask(umask)
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in out.iterdir()} == {
        f.name: oct(0o666 & ~umask) for f in out.iterdir()}

    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.chat_template == CHATML
    gen = json.loads((out / "generation_config.json").read_text())
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert gen["eos_token_id"] == [tok.eos_token_id, im_end]  # generation stops at the end of a turn
    assert gen["pad_token_id"] == tok.pad_token_id and gen["bos_token_id"] == tok.bos_token_id

    prompt = tok.apply_chat_template([{"role": "user", "content": "After 3?"}], add_generation_prompt=True,
                                     tokenize=False)
    ids = tok(prompt, return_tensors="pt").input_ids
    trained = AutoModelForCausalLM.from_pretrained(str(run.paths.model))
    want = _greedy(trained, ids, 12)
    pipe = pipeline("text-generation", model=str(out))
    got = pipe(prompt, max_new_tokens=12, do_sample=False, return_tensors=True)[0]["generated_token_ids"]
    # The pipeline stops at the exported eos ids; the run's model without them runs on.
    assert list(got) == want[: len(got)] and len(got) > ids.shape[1]

    card = (out / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["pipeline_tag"] == "text-generation" and meta["library_name"] == "transformers"
    assert "base_model" not in meta  # a local base is no hub id
    for text in (f"run `{run.id}`", "recipe `tinysft`, task `sft`", "a local model (tiny-chat-base)",
                 "perplexity 12.21", "6 steps", 'pipeline("text-generation"', "float32"):
        assert text in card, text
    assert str(base) not in card and str(tmp_path / "train.jsonl") not in card


def test_dtype_converts_the_weights_and_the_default_keeps_them(base: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    kept = export_model(str(base), tmp_path / "kept")
    assert kept.dtype == "float32"
    source, exported = load_file(str(base / "model.safetensors")), load_file(str(tmp_path / "kept" / "model.safetensors"))
    assert source.keys() == exported.keys() and all(torch.equal(source[k], exported[k]) for k in source)

    half = export_model(str(base), tmp_path / "bf16", dtype="bf16")
    assert half.dtype == "bfloat16"
    tensors = load_file(str(tmp_path / "bf16" / "model.safetensors"))
    assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.bfloat16}
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
    ids = torch.tensor([[5, 17, 99, 240, 7]])
    full = _logits(AutoModelForCausalLM.from_pretrained(str(base)), ids)
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "bf16"), dtype="auto")
    assert loaded.dtype == torch.bfloat16
    low = _logits(loaded, ids)
    assert torch.allclose(full, low, atol=0.05) and not torch.equal(full, low)


def test_a_classifier_exports_with_its_label_names(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification, pipeline

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs()[:200], 400, classification=True, model_max_length=64)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                     id2label={0: "prose", 1: "code"}, label2id={"prose": 0, "code": 1})
    torch.manual_seed(0)
    src = tmp_path / "cls"
    BertForSequenceClassification(cfg).save_pretrained(str(src))
    tok.save_pretrained(str(src))

    done = export_model(str(src), tmp_path / "out")
    assert "generation_config.json" not in done.files
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["id2label"] == {"0": "prose", "1": "code"} and config["label2id"] == {"prose": 0, "code": 1}
    texts = ["for x in range(10): print(x)", "The with statement wraps a block."]
    got = pipeline("text-classification", model=str(tmp_path / "out"))(texts)
    want = pipeline("text-classification", model=str(src))(texts)
    assert {r["label"] for r in got} <= {"prose", "code"}
    assert [r["label"] for r in got] == [r["label"] for r in want]
    assert [r["score"] for r in got] == pytest.approx([r["score"] for r in want], abs=1e-6)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card and "0 = `prose`, 1 = `code`" in card


def test_an_adapter_run_exports_unmerged_and_merged_with_the_same_logits(base: Path, adapter: Path,
                                                                         tmp_path: Path) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = make_run(tmp_path / "runs", base, adapter)
    unmerged = export_model(run.id, tmp_path / "adapter", runs_root=tmp_path / "runs")
    merged = export_model(run.id, tmp_path / "merged", runs_root=tmp_path / "runs", merge=True)
    assert unmerged.kind == "adapter" and merged.kind == "merged model"
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "README.md"} <= set(unmerged.files)
    assert "model.safetensors" not in unmerged.files and "config.json" not in unmerged.files
    assert "adapter_config.json" not in merged.files and "model.safetensors" in merged.files
    assert (tmp_path / "adapter" / "adapter_model.safetensors").read_bytes() == (adapter / "adapter_model.safetensors").read_bytes()

    ids = AutoTokenizer.from_pretrained(str(tmp_path / "adapter"))("class A:", return_tensors="pt").input_ids
    a = _logits(PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(tmp_path / "adapter")), ids)
    b = _logits(AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged")), ids)
    plain = _logits(AutoModelForCausalLM.from_pretrained(str(base)), ids)
    assert torch.allclose(a, b, atol=1e-5) and not torch.allclose(a, plain, atol=1e-3)
    card = (tmp_path / "adapter" / "README.md").read_text()
    assert "library_name: peft" in card and "PeftModel.from_pretrained" in card

    half = export_model(run.id, tmp_path / "adapter-fp16", runs_root=tmp_path / "runs", dtype="fp16")
    weights = load_file(str(tmp_path / "adapter-fp16" / "adapter_model.safetensors"))
    assert half.dtype == "float16" and {t.dtype for t in weights.values()} == {torch.float16}


def test_destinations_that_cannot_be_used_are_typed_errors_and_failures_leave_nothing(
        base: Path, adapter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ModelError, match="busy: the directory exists and is not empty.*--force"):
        export_model(str(base), busy)
    assert tree_snapshot(busy) == {"keep.txt": b"mine"}
    with pytest.raises(ModelError, match="--dtype 'int8': choose one of bf16, fp16, fp32"):
        export_model(str(base), tmp_path / "x", dtype="int8")
    with pytest.raises(ModelError, match="overlaps"):
        export_model(str(base), base / "inside", force=True)
    with pytest.raises(ModelError, match="overlaps"):
        export_model(str(base), base.parent, force=True)
    with monkeypatch.context() as m, pytest.raises(ModelError, match="where you are"):
        m.chdir(busy)
        export_model(str(base), tmp_path, force=True)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ModelError, match="a file is there"):
        export_model(str(base), tmp_path / "a-file")
    with pytest.raises(ModelError, match="a-file/sub: cannot write the export there.*writable directory"):
        export_model(str(base), tmp_path / "a-file" / "sub")

    done = export_model(str(base), busy, force=True)  # replaced in one rename
    assert "keep.txt" not in done.files and "model.safetensors" in done.files

    # An adapter whose base is gone fails after the export started: nothing is left behind,
    # not even the parent directories this call created.
    broken = tmp_path / "broken"
    shutil.copytree(adapter, broken)
    cfg = json.loads((broken / "adapter_config.json").read_text())
    (broken / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": str(tmp_path / "gone")}))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ModelError, match="cannot read its base model"):
        export_model(str(broken), tmp_path / "new" / "deeper" / "out", merge=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_cli_exports_and_bad_destinations_exit_2_without_a_traceback(
        base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "runs", base, base)
    assert main(["export", "last", "--to", str(tmp_path / "out"), "--runs-root", str(tmp_path / "runs"),
                 "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert f"exported  run {run.id} as a model (bfloat16)" in out and "generation_config.json" in out
    assert main(["export", run.id, "--to", str(tmp_path / "out"), "--runs-root", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "error: --to" in err and "--force" in err and "Traceback" not in err
    assert main(["export", "nosuchrun", "--to", str(tmp_path / "o2"), "--runs-root", str(tmp_path / "runs")]) == 2
    assert "no run 'nosuchrun'" in capsys.readouterr().err
    assert MARKERS[1] in (tmp_path / "out" / "tokenizer.json").read_text()


def test_the_card_names_the_run_a_model_was_tuned_from(tmp_path: Path) -> None:
    """An SFT run from `run:quickstart` records the base run's model directory; its card says
    which run that is, not "a local model (model)"."""
    from clustertune.runs.run import Run
    from clustertune.use.model_card import _shown

    base = Run.create(tmp_path, "quickstart", "causal_lm", None, ["clustertune", "run"])
    assert _shown(str(base.paths.model)) == f"the model of run `{base.id}`"
    assert _shown(str(tmp_path / "mine" / "model")) == "a local model (model)"
    assert _shown("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB/SmolLM2-135M"
