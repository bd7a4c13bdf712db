"""The chunked output layer plus cross-entropy equals the unfused one: loss and every gradient,
whatever the chunking, with ignored rows, with and without a bias, and in 16-bit inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from clustertune.train.chunked_loss import chunked_linear_cross_entropy, linear_cross_entropy


def _inputs(n: int = 37, h: int = 16, v: int = 211, bias: bool = True, dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(n, h, generator=g).to(dtype).requires_grad_()
    weight = (torch.randn(v, h, generator=g) / 4).to(dtype).requires_grad_()
    b = torch.randn(v, generator=g).to(dtype).requires_grad_() if bias else None
    targets = torch.randint(0, v, (n,), generator=g)
    targets[::4] = -100
    return hidden, weight, b, targets


def _unfused(hidden, weight, bias, targets):
    logits = hidden.float() @ weight.float().T + (bias.float() if bias is not None else 0)
    return F.cross_entropy(logits, targets, ignore_index=-100)


@pytest.mark.parametrize("chunk", [1, 5, 37, 1000])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_the_unfused_loss_and_gradients(chunk: int, bias: bool) -> None:
    hidden, weight, b, targets = _inputs(bias=bias)
    want = _unfused(hidden, weight, b, targets)
    (want * 3).backward()  # a gradient from above that is not 1 reaches every input scaled
    grads = [x.grad.clone() for x in (hidden, weight, b) if x is not None]
    for x in (hidden, weight, b):
        if x is not None:
            x.grad = None
    got = chunked_linear_cross_entropy(hidden, weight, targets, b, chunk_rows=chunk)
    (got * 3).backward()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for g, x in zip(grads, [x for x in (hidden, weight, b) if x is not None]):
        torch.testing.assert_close(x.grad, g, atol=1e-5, rtol=1e-5)
    # On CPU the dispatcher takes the chunked version (Liger's kernel is for GPUs).
    assert torch.equal(linear_cross_entropy(hidden.detach(), weight.detach(), targets, None if b is None else b.detach(),
                                            chunk_rows=chunk),
                       chunked_linear_cross_entropy(hidden.detach(), weight.detach(), targets,
                                                    None if b is None else b.detach(), chunk_rows=chunk))


def test_all_rows_ignored_is_zero_with_zero_gradients() -> None:
    hidden, weight, b, targets = _inputs()
    targets[:] = -100
    loss = chunked_linear_cross_entropy(hidden, weight, targets, b, chunk_rows=8)
    loss.backward()
    assert loss.item() == 0.0 and hidden.grad.abs().sum() == 0 and weight.grad.abs().sum() == 0


def test_bf16_inputs_compute_in_fp32_and_keep_their_gradients_dtype() -> None:
    hidden, weight, _, targets = _inputs(bias=False, dtype=torch.bfloat16)
    got = chunked_linear_cross_entropy(hidden, weight, targets, chunk_rows=10)
    got.backward()
    assert got.dtype == torch.float32 and hidden.grad.dtype == weight.grad.dtype == torch.bfloat16
    torch.testing.assert_close(got, _unfused(hidden.detach(), weight.detach(), None, targets), atol=1e-5, rtol=1e-5)


def test_shapes_that_do_not_match_are_refused() -> None:
    hidden, weight, b, targets = _inputs()
    with pytest.raises(ValueError, match=r"hidden must be \(n, h\) and targets \(n,\)"):
        chunked_linear_cross_entropy(hidden.unsqueeze(0), weight, targets)
