"""The kernels a run swaps in before training (``train/fastpath.py``): GPT-2's written-out tanh
GELU as torch's one kernel, PEFT's adapter layers keeping a half-precision input under autocast,
and eager attention on CPU in bf16 at short sequences. Each must compute what the model computed
before (the speed is measured in ``benchmarks/sft_cpu.py``, not here)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import clustertune as ct
from clustertune.recipe.load import load_recipe
from clustertune.train.fastpath import cpu_attention, fuse_tanh_gelu, keep_half_inputs, prepare_module
from tests.helpers import TINY_CAUSAL, with_


def _gpt2(activation: str = "gelu_new", lora: bool = False) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=256, n_positions=48, n_embd=32, n_layer=2, n_head=2, activation_function=activation,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj", "c_fc"],
                                                 lora_dropout=0.0, fan_in_fan_out=True))
    return model


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 256, (3, 40), generator=g)
    mask = torch.ones_like(ids)
    mask[0, 30:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _loss_and_grads(model: torch.nn.Module, batch: dict[str, torch.Tensor],
                    bf16: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(**batch, use_cache=False).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_the_fused_gelu_computes_gpt2s_function_and_leaves_the_saved_config_alone(tmp_path: Path) -> None:
    plain = _gpt2()
    fused = copy.deepcopy(plain)
    assert fuse_tanh_gelu(fused) == 2  # one per block
    assert not any(type(m).__name__ == "NewGELUActivation" for m in fused.modules())
    # The function itself over the range where the GELUs differ (erf's is up to 3e-4 away).
    from transformers.activations import NewGELUActivation

    x = torch.linspace(-8, 8, 4001)
    for swapped in (fused.transformer.h[0].mlp.act, fused.transformer.h[1].mlp.act):
        assert torch.allclose(swapped(x), NewGELUActivation()(x), rtol=0, atol=1e-6)
    loss_a, grads_a = _loss_and_grads(plain, _batch())
    loss_b, grads_b = _loss_and_grads(fused, _batch())
    assert torch.allclose(loss_a, loss_b, rtol=0, atol=1e-5)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        assert torch.allclose(grads_a[name], grads_b[name], rtol=1e-4, atol=1e-5), name
    fused.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["activation_function"] == "gelu_new"
    # Other activations are other functions: left as they are.
    assert fuse_tanh_gelu(_gpt2("quick_gelu")) == 0
    assert fuse_tanh_gelu(_gpt2("gelu_fast")) == 2


class _Casts(TorchDispatchMode):
    """Counts dtype conversions (``aten._to_copy``) run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func is torch.ops.aten._to_copy.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_adapter_layers_under_autocast_skip_the_round_trip_through_fp32_with_identical_gradients() -> None:
    casting = _gpt2(lora=True)
    keeping = copy.deepcopy(casting)
    assert keep_half_inputs(keeping) == 8  # c_attn, c_proj (attention's and the MLP's), c_fc: 4 x 2 blocks
    counts = []
    for model in (casting, keeping):
        with _Casts() as casts:
            loss, grads = _loss_and_grads(model, _batch(), bf16=True)
        counts.append((casts.count, loss, grads))
    (n_casting, loss_a, grads_a), (n_keeping, loss_b, grads_b) = counts
    assert n_keeping < n_casting, (n_keeping, n_casting)
    assert torch.equal(loss_a, loss_b)
    for name in grads_a:  # bf16 -> fp32 -> bf16 is exact: not close, equal
        assert torch.equal(grads_a[name], grads_b[name]), name


@pytest.mark.parametrize(("precision", "block", "attn", "expected"), [
    ("bf16", 64, None, "eager"),
    ("fp32", 64, None, None),  # SDPA is as fast in fp32
    ("bf16", 512, None, None),  # past 256 positions SDPA catches up
    ("bf16", 64, "sdpa", None),  # the recipe's own choice stands
])
def test_eager_attention_is_chosen_on_cpu_only_in_bf16_at_short_sequences(precision: str, block: int,
                                                                        attn: str | None, expected: str | None) -> None:
    r = load_recipe(with_(TINY_CAUSAL, model={**TINY_CAUSAL["model"], "attn_implementation": attn,
                                              "config_overrides": {**TINY_CAUSAL["model"]["config_overrides"],
                                                                   "n_positions": 512}},
                          data={**TINY_CAUSAL["data"], "block_size": block}, train={"precision": precision}))
    mixed = {"fp32": "no"}.get(precision, precision)
    assert cpu_attention(r, mixed) == expected


def test_packed_examples_stay_apart_under_the_swapped_kernels_in_bf16() -> None:
    model = _gpt2(lora=True)
    r = load_recipe(with_(TINY_CAUSAL, train={"precision": "bf16"}))
    prepare_module(model, r, "bf16")
    assert model.config._attn_implementation == "eager"
    ids = _batch()["input_ids"][1:2]
    pos = torch.cat([torch.arange(15), torch.arange(25)])[None]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        packed = model(input_ids=ids, position_ids=pos, use_cache=False).logits[0, 15:]
        alone = model(input_ids=ids[:, 15:], use_cache=False).logits[0]
    assert torch.allclose(packed.float(), alone.float(), atol=1e-2), (packed - alone).abs().max()


def test_a_bf16_run_on_cpu_says_which_attention_it_chose(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = load_recipe(with_(TINY_CAUSAL, train={"precision": "bf16", "max_steps": 2, "eval_at_start": False},
                          tracking={"runs_root": str(tmp_path)}))
    ct.run(r, show_progress=False)
    said = [line for line in capfd.readouterr().err.splitlines() if line.startswith("attention:")]
    assert said == ["attention: eager (training on CPU in bf16 at 64 positions, where it is faster than sdpa; "
                    "set model.attn_implementation to choose)"]
