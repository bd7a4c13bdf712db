"""The SFT loss over trained positions only equals the model's own loss from full logits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from clustertune.data.loader import to_batch
from clustertune.data.packing import build_rows
from clustertune.train.loop import forward
from clustertune.train.sft_loss import TrainedPositions, trained_targets

CPU = torch.device("cpu")


def _model(arch: str) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if arch == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=100, n_layer=2, n_embd=64, n_head=2, n_positions=64,
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    return LlamaForCausalLM(LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64))


def _rows(packed: bool) -> Any:
    rng = np.random.default_rng(3)
    ids, masks = [], []
    for _ in range(7):
        k = int(rng.integers(5, 20))
        ids.append(rng.integers(1, 100, k))
        m = (rng.random(k) < 0.5).astype(np.uint8)
        m[0], m[-1] = 0, 1
        masks.append(m)
    return build_rows(ids, masks, 40, packed, 0, np.int32)


def _grads(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("fused", [False, True])
def test_trained_positions_loss_and_gradients_equal_full_logits(arch: str, packed: bool, fused: bool) -> None:
    model = _model(arch).train()
    rows = _rows(packed)
    batch = to_batch(rows, np.arange(len(rows)), CPU)
    full = forward(model, batch)  # the model's own loss: full logits, shifted labels
    full.loss.backward()
    want = _grads(model)
    model.zero_grad()

    kept = TrainedPositions(model, fused=fused)
    assert kept.fused is fused
    out = forward(model, batch, kept)
    out.loss.backward()
    n = int((batch["labels"][:, 1:] != -100).sum())
    if fused:  # the output layer gave the loss itself: no logits were made whole
        assert out.logits is None
    else:
        assert out.logits.shape == (n, 100)  # the output layer saw the trained positions only
    assert abs(out.loss.item() - full.loss.item()) < 1e-5
    got = _grads(model)
    assert got.keys() == want.keys()
    for name, g in want.items():
        torch.testing.assert_close(got[name], g, atol=1e-5, rtol=1e-4, msg=name)

    # Outside the SFT forward the hook leaves the model alone (generation, plain calls).
    with torch.no_grad():
        plain = model(input_ids=batch["input_ids"][:1, :5])
    assert plain.logits.shape == (1, 5, 100)
    kept.remove()
    assert "forward" not in vars(model.get_output_embeddings())  # the layer's own forward again


def test_an_output_layer_that_is_not_a_plain_linear_keeps_the_unfused_loss() -> None:
    model = _model("gpt2")

    class Scaled(torch.nn.Linear):  # a wrapper computing more than weight and bias
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 2

    head = model.get_output_embeddings()
    scaled = Scaled(head.in_features, head.out_features, bias=False)
    model.set_output_embeddings(scaled)
    assert TrainedPositions(model, fused=True).fused is False


def test_targets_are_the_next_tokens_that_carry_labels() -> None:
    labels = torch.tensor([[-100, 5, 6, -100], [-100, -100, -100, 9]])
    index, targets = trained_targets(labels)
    assert index.tolist() == [0, 1, 6]  # row 0 predicts 5 at 0 and 6 at 1; row 1 predicts 9 at 2
    assert targets.tolist() == [5, 6, 9]


@pytest.mark.parametrize("fused", [False, True])
def test_batch_without_labels_has_zero_loss_not_nan(fused: bool) -> None:
    model = _model("gpt2").train()
    kept = TrainedPositions(model, fused=fused)
    ids = torch.randint(1, 100, (2, 6))
    out = forward(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                          "labels": torch.full_like(ids, -100)}, kept)
    assert out.loss.item() == 0.0
    out.loss.backward()  # still part of the graph
