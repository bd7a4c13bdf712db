"""Packed SFT rows train exactly like their examples one at a time, through the loop's forward."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from clustertune.data.loader import to_batch
from clustertune.data.packing import build_rows
from clustertune.train.loop import forward

CPU = torch.device("cpu")


def _model(arch: str) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = GPT2Config(vocab_size=100, n_layer=2, n_embd=64, n_head=2, n_positions=64,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return GPT2LMHeadModel(cfg)
    cfg = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg)


def _examples(n: int = 9) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(1)
    ids, masks = [], []
    for _ in range(n):
        k = int(rng.integers(4, 21))
        ids.append(rng.integers(1, 100, k))
        m = (rng.random(k) < 0.6).astype(np.uint8)
        m[0] = 0  # as prepare writes them: an example's first token is never a label
        m[-1] = 1
        masks.append(m)
    return ids, masks


def _grads(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_packed_batch_loss_and_gradients_equal_examples_one_at_a_time(arch: str) -> None:
    model = _model(arch).train()
    ids, masks = _examples()
    packed = build_rows(ids, masks, 48, True, 0, np.int32)
    single = build_rows(ids, masks, 48, False, 0, np.int32)
    assert 1 < len(packed) < len(single)  # several rows, several examples in a row

    batch = to_batch(packed, np.arange(len(packed)), CPU)
    assert "attention_mask" not in batch and "position_ids" in batch
    loss = forward(model, batch).loss
    loss.backward()
    packed_grads = _grads(model)

    # The same examples alone, each weighted by its share of the trained tokens (the packed loss
    # is a mean over all of them).
    model.zero_grad()
    counts = [int(m.sum()) for m in masks]
    total = 0.0
    for i in range(len(single)):
        alone = forward(model, to_batch(single, np.array([i]), CPU)).loss * counts[i] / sum(counts)
        alone.backward()
        total += alone.item()
    assert abs(loss.item() - total) < 1e-5
    alone_grads = _grads(model)
    assert packed_grads.keys() == alone_grads.keys()
    for name, g in packed_grads.items():
        torch.testing.assert_close(g, alone_grads[name], atol=1e-5, rtol=0, msg=name)

    # Why the forward call turns the KV cache off: with it, transformers skips the packed-sequence
    # mask and the examples of a row attend to each other.
    with torch.no_grad():
        leaky = model(**batch, use_cache=True).loss.item()
    assert abs(leaky - loss.item()) > 1e-3


def test_unpacked_batches_are_padded_to_their_longest_example() -> None:
    model = _model("gpt2").eval()
    ids, masks = _examples()
    rows = build_rows(ids, masks, 48, False, 0, np.int32)
    batch = to_batch(rows, np.array([0, 1, 2]), CPU)
    assert batch["input_ids"].shape[1] == max(len(x) for x in ids[:3])
    assert batch["attention_mask"].sum().item() == sum(len(x) for x in ids[:3])
    counts = [int(m.sum()) for m in masks[:3]]
    with torch.no_grad():
        together = forward(model, batch).loss.item()
        alone = sum(forward(model, to_batch(rows, np.array([i]), CPU)).loss.item() * counts[i] for i in range(3))
    assert abs(together - alone / sum(counts)) < 1e-5


def test_generated_answers_end_at_the_end_marker_even_when_cut_off() -> None:
    from clustertune.train.sft_eval import cut_answer, score

    stops = ["<|im_end|>", "<|endoftext|>"]
    assert cut_answer(" beta<|im_end|>\n<|im_start|>", stops) == "beta"
    assert cut_answer("beta<|im", stops) == "beta"  # max_new_tokens ran out inside the marker
    assert cut_answer("beta and more", stops) == "beta and more"
    assert score(["beta", "the beta one", "gamma"], ["beta", "beta", "beta"]) == {
        "eval_exact_match": 1 / 3, "eval_contains": 2 / 3}
