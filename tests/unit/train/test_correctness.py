"""Each correctness check on a tiny GPT-2 (2 layers, width 64): it holds where it should, and a
case made to break it on purpose is caught with a message that says the fix."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from clustertune.train import correctness as c
from clustertune.train.loop import forward

VOCAB = 97


@pytest.fixture(scope="module")
def model() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_layer=2, n_embd=64, n_head=2, n_positions=64,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg).eval()


def _packed_row() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (1, 17), generator=torch.Generator().manual_seed(1))
    pos = torch.tensor([list(range(10)) + list(range(7))])
    labels = ids.clone()
    labels[0, [0, 10]] = -100  # each example's first token is never trained
    return {"input_ids": ids, "labels": labels, "position_ids": pos}


def _forward_with_cache(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> object:
    """The forward call packed rows must not use: with a KV cache transformers skips the
    block-diagonal mask, and one example attends to the one before it."""
    return model(**batch, use_cache=True)


def test_every_batch_has_trained_tokens() -> None:
    good = {"labels": torch.tensor([[-100, 5, 6], [-100, -100, 7]])}
    empty = {"labels": torch.tensor([[3, -100, -100], [-100, -100, -100]])}  # only a row's first position
    assert c.trained_tokens_in_every_batch([good, good]) is None
    problem = c.trained_tokens_in_every_batch([good, empty])
    assert problem is not None and problem.startswith("batch 1 has no trained token") and "loss_on" in problem


def test_packed_loss_equals_unpacked_through_the_loops_forward(model: GPT2LMHeadModel) -> None:
    row = _packed_row()
    assert c.packed_equals_unpacked(model, row, forward) is None
    problem = c.packed_equals_unpacked(model, row, _forward_with_cache)
    assert problem is not None and "packed examples see each other" in problem and "packing=false" in problem


def test_no_packed_example_attends_to_the_one_before(model: GPT2LMHeadModel) -> None:
    row = _packed_row()
    assert c.no_attention_across_examples(model, row, forward) is None
    problem = c.no_attention_across_examples(model, row, _forward_with_cache)
    assert problem is not None and "attend to each other" in problem


def test_a_model_built_from_a_config_starts_near_ln_vocab(model: GPT2LMHeadModel) -> None:
    ids = torch.randint(0, VOCAB, (4, 32), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        loss = float(model(input_ids=ids, labels=ids).loss)
    assert c.starts_near_uniform(loss, VOCAB) is None
    # Labels of another vocabulary (or shifted twice) look like a model that already knows them,
    # or one that is sure of the wrong answers: both far from ln(vocab).
    assert "far from ln(vocab)" in (c.starts_near_uniform(0.3 * math.log(VOCAB), VOCAB) or "")
    assert "far from ln(vocab)" in (c.starts_near_uniform(float("nan"), VOCAB) or "")


def test_the_adapter_trains_what_it_targets(model: GPT2LMHeadModel) -> None:
    from peft import LoraConfig, get_peft_model

    import copy

    peft = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    problem, count = c.adapter_trains_its_targets(peft, ["c_attn"])
    assert problem is None and count == sum(p.numel() for p in peft.parameters() if p.requires_grad) > 0
    problem, _ = c.adapter_trains_its_targets(peft, ["c_attn", "c_fc"])
    assert problem is not None and "no trainable parameter on c_fc" in problem
    for p in peft.base_model.model.transformer.wte.parameters():
        p.requires_grad_(True)  # a base weight left trainable: not what the recipe asked for
    problem, _ = c.adapter_trains_its_targets(peft, ["c_attn"])
    assert problem is not None and "outside the adapter" in problem and "wte" in problem


def test_chat_template_markers_are_single_tokens() -> None:
    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs()[:300], 300, classification=False, model_max_length=64)
    # A tokenizer trained here has ChatML's markers as single tokens; Llama 3's it lacks.
    assert c.template_tokens_are_single(tok, ["<|im_start|>", "<|im_end|>"]) is None
    markers = ["<|start_header_id|>", "<|eot_id|>"]
    problem = c.template_tokens_are_single(tok, markers)
    assert problem is not None and "<|start_header_id|>" in problem and "add them as special tokens" in problem
    tok.add_special_tokens({"additional_special_tokens": markers})
    assert c.template_tokens_are_single(tok, markers) is None
