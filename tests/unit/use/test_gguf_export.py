"""`export --format gguf`: llama.cpp's converter on a tiny model whose tokenizer was trained on
the spot (mapped to GPT-2's pre-tokenizer), read back by PyPI's gguf reader; the check catches
a changed weight, vocabulary or template; a failed check or an unknown tokenizer leaves nothing
behind; the Modelfile's Go template renders what the Jinja template renders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from clustertune.cli.main import main
from clustertune.data.templates import CHATML, LLAMA3
from clustertune.errors import ModelError
from clustertune.use import gguf_check
from clustertune.use.gguf_check import check_gguf
from clustertune.use.gguf_export import export_gguf
from clustertune.use.modelfile import GO_TEMPLATES, modelfile
from tests.helpers import tree_snapshot
from clustertune.use.fidelity import check_export
from clustertune.use.load import find_target
from tests.sft_fixtures import CHATS, make_base


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    return make_base(tmp_path_factory.mktemp("gguf-base") / "tiny-chat", chat_template=CHATML)


@pytest.fixture(scope="module")
def f16(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base exported through the CLI as f16 (the default)."""
    out = tmp_path_factory.mktemp("gguf-f16") / "tiny-gguf"
    assert main(["export", str(base), "--format", "gguf", "--to", str(out)]) == 0
    return out


def _fields(path: Path) -> dict[str, object]:
    import gguf

    return {k: f.contents() for k, f in gguf.GGUFReader(str(path)).fields.items()}


def test_the_gguf_file_holds_the_tokenizer_and_template(base: Path, f16: Path) -> None:
    from transformers import AutoTokenizer

    assert sorted(p.name for p in f16.iterdir()) == ["Modelfile", "model-f16.gguf"]
    fields = _fields(f16 / "model-f16.gguf")
    tok = AutoTokenizer.from_pretrained(str(base))
    vocab = {i: t for t, i in tok.get_vocab().items()}
    assert fields["tokenizer.ggml.tokens"] == [vocab[i] for i in range(len(vocab))]
    assert fields["tokenizer.ggml.pre"] == "gpt-2"  # the converter's table does not know it: mapped
    spec = json.loads((base / "tokenizer.json").read_text())
    assert fields["tokenizer.ggml.merges"] == [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    assert fields["tokenizer.chat_template"] == CHATML
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert fields["tokenizer.ggml.token_type"][im_end] == 3  # CONTROL: one token in a prompt
    assert fields["tokenizer.ggml.eos_token_id"] == tok.eos_token_id
    assert fields["general.architecture"] == "gpt2" and fields["gpt2.context_length"] == 128

    # What the export's fidelity check found: the file, read by transformers' GGUF loader, answers
    # the prompts as the model does (a plain directory: the builtin corpus's questions).
    found = check_export(find_target(str(base)), f16, artifact="the GGUF file (f16)", precision="f16",
                         gguf_file="model-f16.gguf", device="cpu")
    assert found.passed and found.source == "the builtin corpus" and found.prompts == 8, found.differences
    assert found.templates_equal == 8 and found.tokens_equal == 8 and found.agreement >= 0.9
    assert 0 < found.logprob_gap < 1e-2  # f16's rounding, and no more


def test_the_check_names_a_changed_weight_vocabulary_and_template(base: Path, f16: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    other = tmp_path / "other"
    shutil.copytree(base, other)
    weights = load_file(str(other / "model.safetensors"))
    weights["transformer.h.1.mlp.c_fc.weight"][3, 5] += 0.01  # one value, well beyond f16's rounding
    save_file(weights, str(other / "model.safetensors"), metadata={"format": "pt"})
    tok = AutoTokenizer.from_pretrained(str(other))
    tok.chat_template = LLAMA3
    tok.add_tokens(["zzz-new"])
    tok.save_pretrained(str(other))

    problems = check_gguf(f16 / "model-f16.gguf", other)
    assert any(p.startswith("tensor transformer.h.1.mlp.c_fc.weight (blk.1.ffn_up.weight, F16): 1 of 16384 values")
               for p in problems), problems
    assert any(p.startswith("vocabulary: 515 tokens, the tokenizer has 516") for p in problems), problems
    assert "chat template: differs from the tokenizer's" in problems
    assert check_gguf(f16 / "model-f16.gguf", base) == []


def test_an_adapter_run_merges_and_exports_as_q8_0_within_its_stated_error(base: Path, tmp_path: Path,
                                                                         capfd: pytest.CaptureFixture[str]) -> None:
    import gguf
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base)),
                           LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False))
    adapter = tmp_path / "adapter"
    model.save_pretrained(str(adapter))
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(str(adapter))
    merged = model.merge_and_unload()

    done = export_gguf(str(adapter), tmp_path / "q8", quant="q8_0")
    assert done.gguf.name == "model-q8_0.gguf" and done.pre_tokenizer == "gpt-2"
    assert done.fidelity.passed and done.fidelity.threshold == 0.8 and done.fidelity.agreement >= 0.8
    assert "GGUF tensors" not in capfd.readouterr().err  # the GGUF loader's progress bar stays off the terminal
    reader = gguf.GGUFReader(str(done.gguf))
    qkv = next(t for t in reader.tensors if t.name == "blk.0.attn_qkv.weight")
    assert qkv.tensor_type == gguf.GGMLQuantizationType.Q8_0
    got = gguf.quants.dequantize(qkv.data, qkv.tensor_type)
    want = merged.transformer.h[0].attn.c_attn.weight.detach().numpy().T  # the merged weight, not the base's
    assert np.abs(got - want).max() <= np.abs(want).max() / 127
    base_w = AutoModelForCausalLM.from_pretrained(str(base)).transformer.h[0].attn.c_attn.weight.detach().numpy().T
    assert np.abs(got - base_w).max() > np.abs(want).max() / 127


def test_a_failed_check_leaves_nothing_and_says_what_differed(base: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # the export imports the check when it runs it, so the check is replaced where it lives
    monkeypatch.setattr(gguf_check, "check_gguf", lambda path, model: ["tensor wte: 3 of 33088 values differ"])
    with pytest.raises(ModelError, match="does not hold the model, so it was deleted") as err:
        export_gguf(str(base), tmp_path / "exports" / "bad")
    assert "tensor wte: 3 of 33088 values differ" in str(err.value)
    assert tree_snapshot(tmp_path) == {} and not (tmp_path / "exports").exists()


def test_a_bpe_tokenizer_the_converter_does_not_know_is_refused(base: Path, tmp_path: Path) -> None:
    model = tmp_path / "metaspace"
    shutil.copytree(base, model)
    spec = json.loads((model / "tokenizer.json").read_text())
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, spec["pre_tokenizer"]]}
    (model / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ModelError, match=r"pre-tokenizer \(Sequence\[Digits, ByteLevel\]\) is neither one llama.cpp"):
        export_gguf(str(model), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _go_render(template: str, messages: list[dict[str, str]]) -> str:
    """The Modelfile's template as Ollama renders it: the range body per message, then the rest."""
    head, rest = template.split("{{- range .Messages }}")
    body, tail = rest.split("{{ end }}")
    return head + "".join(body.replace("{{ .Role }}", m["role"]).replace("{{ .Content }}", m["content"])
                          for m in messages) + tail


@pytest.mark.parametrize("template", [CHATML, LLAMA3], ids=["chatml", "llama3"])
def test_the_modelfile_template_renders_what_the_jinja_template_renders(base: Path, template: str) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    for chat in CHATS:
        prompt = chat[:-1]  # up to the last user turn: the reply is the model's
        want = tok.apply_chat_template(prompt, chat_template=template, tokenize=False, add_generation_prompt=True)
        want = want.removeprefix(tok.bos_token)  # llama.cpp adds bos itself where the tokenizer does
        assert _go_render(GO_TEMPLATES[template].text(), prompt) == want
    text = modelfile("model-f16.gguf", template)
    assert "FROM ./model-f16.gguf" in text and f'TEMPLATE """{GO_TEMPLATES[template].text()}"""' in text


def test_a_custom_template_is_named_in_the_modelfile(f16: Path) -> None:
    assert 'TEMPLATE """{{- range .Messages }}<|im_start|>' in (f16 / "Modelfile").read_text()
    custom = modelfile("m.gguf", "{{ messages[0]['content'] }}")
    assert "TEMPLATE" not in custom.replace("as a TEMPLATE", "") and "Ollama cannot run" in custom


def test_a_llama_layout_model_converts_with_its_query_and_key_rows_as_llama_cpp_stores_them(
        base: Path, tmp_path: Path) -> None:
    """Grouped-query attention (4 query heads, 2 key/value heads): the check follows the
    converter's reordering of the query and key rows, and would name a weight stored unordered."""
    import gguf
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(base))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = tmp_path / "tiny-llama"
    LlamaForCausalLM(cfg).save_pretrained(str(model))
    tok.save_pretrained(str(model))
    done = export_gguf(str(model), tmp_path / "out")
    assert _fields(done.gguf)["general.architecture"] == "llama"

    from clustertune.use.gguf_check import _compare

    q = next(t for t in gguf.GGUFReader(str(done.gguf)).tensors if t.name == "blk.0.attn_q.weight")
    from safetensors.numpy import load_file

    want = load_file(str(model / "model.safetensors"))["model.layers.0.self_attn.q_proj.weight"]
    assert _compare(gguf, "q_proj", want, q, rope_heads=4) == []
    assert "values differ beyond F16's error" in _compare(gguf, "q_proj", want, q, rope_heads=None)[0]
