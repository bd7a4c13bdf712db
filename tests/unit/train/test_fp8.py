"""``train.fp8``: what it refuses before a run starts and on a rank without FP8 tensor cores, which
layers it converts, and that the converted model trains like the bf16 one (torchao's emulated
FP8 arithmetic on this CPU; the GPU kit's fp8 part measures the real multiplies)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import clustertune as ct
from clustertune.errors import RecipeError, UserError
from clustertune.recipe.load import load_recipe
from clustertune.runs import RunState
from clustertune.train.fp8 import check_fp8_device, fp8_layers, to_fp8
from tests.helpers import TINY_CAUSAL, with_

FULL = with_(TINY_CAUSAL, train={"fp8": True, "precision": "bf16"})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"train": {"strategy": "deepspeed"}}, "DeepSpeed's engine does not train torchao's FP8 layers"),
        ({"train": {"precision": "fp32"}}, "precision fp32 has none: use bf16 (or auto)"),
        ({"model": {"adapter": {"type": "lora"}}}, "with an adapter the base is frozen"),
    ],
)
def test_what_fp8_cannot_be_combined_with_is_named_before_the_run(change: dict, words: str) -> None:
    recipe = with_(FULL, **{k: {**FULL[k], **v} for k, v in change.items()})
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe)
    assert "train.fp8: " in str(err.value) and words in str(err.value), str(err.value)
    assert load_recipe(with_(FULL, train={"strategy": "fsdp"})).train.fp8  # full fine-tuning, bf16: accepted


def test_a_rank_without_fp8_tensor_cores_is_refused_with_the_gpus_that_have_them(runs_root: Path) -> None:
    with pytest.raises(UserError, match=r"compute capability 8\.9 or later: H100, H200, L40S, RTX 4090\), and this "
                                        r"rank trains on the cpu; drop train.fp8"):
        check_fp8_device(torch.device("cpu"))
    # A whole run: refused on its rank before the model is built, the run FAILED with the reason.
    with pytest.raises(UserError, match="train.fp8: FP8 matrix multiplies need an NVIDIA GPU"):
        ct.run(load_recipe(with_(FULL, train={"max_steps": 2})), show_progress=False)
    (run,) = ct.list_runs()
    assert run.state is RunState.FAILED and "train.fp8" in (run.info.reason or "")


def test_without_torchao_the_install_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))
    with pytest.raises(UserError, match=r"train.fp8 needs the torchao package, not installed here: .*fp8"):
        check_fp8_device(torch.device("cpu"))


def _llama(seed: int = 0) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=32, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg)


def test_every_linear_layer_but_the_output_layer_is_converted_and_the_names_stay() -> None:
    model = _llama()
    names = set(model.state_dict())
    converted = to_fp8(model, sharded=False, emulate=True)
    assert sorted(converted) == sorted(f"model.layers.{i}.{part}" for i in range(2) for part in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))
    assert fp8_layers(model) == 14 and type(model.lm_head) is torch.nn.Linear
    assert set(model.state_dict()) == names  # checkpoints and save_pretrained see the plain model
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=64, n_head=2, n_positions=32, vocab_size=96))
    with pytest.raises(UserError, match="this model has Conv1D, Linear: GPT-2's Conv1D is not one"):
        to_fp8(gpt2, sharded=False, emulate=True)


def test_the_fp8_model_trains_like_the_bf16_one() -> None:
    ids = torch.randint(0, 96, (8, 32), generator=torch.Generator().manual_seed(1))
    curves = {}
    for fp8 in (False, True):
        model = _llama()
        if fp8:
            to_fp8(model, sharded=False, emulate=True)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(30):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        curves[fp8] = losses
    bf16, fp8 = curves[False], curves[True]
    assert fp8[-1] < 0.5 * fp8[0], fp8  # it learns
    assert abs(fp8[-1] - bf16[-1]) <= 0.05 * bf16[-1], (bf16[-1], fp8[-1])  # as bf16 does
    assert fp8 != bf16  # and the FP8 arithmetic was really used
