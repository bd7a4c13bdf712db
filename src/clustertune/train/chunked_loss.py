"""The output layer and the cross-entropy in one step, a chunk of rows at a time, so the
``(tokens, vocabulary)`` logits never exist whole.

With a large vocabulary the logits are the largest tensor of a step: 8 x 2048 tokens over
Llama 3's 128,256 entries are 8 GiB in fp32, held for the backward. Here the forward computes,
for each chunk of rows, the logits, their log-sum-exp, the loss, and at once the gradients of
the hidden states and of the weight (softmax minus one-hot, over the mean's denominator); only
the gradients are kept, and the backward scales them by the incoming gradient. Peak memory for
the logits is one chunk's. This is the approach of Liger Kernel's fused linear cross-entropy,
written in torch (Liger's Triton kernel is used instead where it is installed and the tensors
are on a GPU: :func:`linear_cross_entropy`).

The result equals ``F.cross_entropy(hidden @ weight.T + bias, targets, ignore_index=-100)``
(mean over the targets that are not ignored), in fp32 whatever the inputs' dtype.
"""

from __future__ import annotations

from typing import Any

import torch

IGNORE_INDEX = -100
# Rows per chunk: 4096 x 128k vocabulary is 2 GiB of fp32 logits at a time.
DEFAULT_CHUNK_ROWS = 4096


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                targets: torch.Tensor, chunk_rows: int) -> torch.Tensor:
        valid = targets != IGNORE_INDEX
        count = valid.sum().clamp(min=1).to(torch.float32)  # the mean's denominator (0 targets: loss 0)
        w = weight.float()
        grad_hidden = torch.zeros_like(hidden) if hidden.requires_grad else None
        grad_weight = torch.zeros_like(w) if weight.requires_grad else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if bias is not None and bias.requires_grad else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], chunk_rows):
            h = hidden[start:start + chunk_rows].float()
            t = targets[start:start + chunk_rows]
            ok = valid[start:start + chunk_rows]
            logits = h @ w.T
            if bias is not None:
                logits = logits + bias.float()
            lse = torch.logsumexp(logits, dim=-1)
            safe = t.clamp(min=0)
            picked = logits.gather(1, safe.unsqueeze(1)).squeeze(1)
            total += ((lse - picked) * ok).sum()
            # d(loss)/d(logits) = (softmax - one_hot) / count on the kept rows, 0 on ignored ones.
            grad = torch.exp(logits - lse.unsqueeze(1))
            grad.scatter_add_(1, safe.unsqueeze(1), -torch.ones_like(picked).unsqueeze(1))
            grad *= (ok.to(grad.dtype) / count).unsqueeze(1)
            if grad_hidden is not None:
                grad_hidden[start:start + chunk_rows] = (grad @ w).to(hidden.dtype)
            if grad_weight is not None:
                grad_weight += grad.T @ h
            if grad_bias is not None:
                grad_bias += grad.sum(0)
        ctx.save_for_backward(*(g for g in (grad_hidden, grad_weight, grad_bias) if g is not None))
        ctx.has = (grad_hidden is not None, grad_weight is not None, grad_bias is not None)
        ctx.dtypes = (weight.dtype, None if bias is None else bias.dtype)
        return total / count

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        saved = iter(ctx.saved_tensors)
        gh, gw, gb = (next(saved) if has else None for has in ctx.has)
        w_dtype, b_dtype = ctx.dtypes
        return (None if gh is None else gh * grad_out.to(gh.dtype),
                None if gw is None else (gw * grad_out).to(w_dtype),
                None if gb is None else (gb * grad_out).to(b_dtype),
                None, None)


def chunked_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                                 bias: torch.Tensor | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> torch.Tensor:
    """Mean cross-entropy of ``hidden (n, h) @ weight.T (v, h) + bias`` against ``targets (n,)``
    (``-100`` ignored), without the ``(n, v)`` logits whole: see the module's docstring."""
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be (n, h) and targets (n,); got {tuple(hidden.shape)} and {tuple(targets.shape)}")
    return _ChunkedLinearCrossEntropy.apply(hidden, weight, bias, targets, max(int(chunk_rows), 1))


def liger_available(hidden: torch.Tensor) -> bool:
    """Whether Liger Kernel's fused kernel can take these tensors (installed, and on a GPU)."""
    if not hidden.is_cuda:
        return False
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy  # noqa: F401
    except ImportError:
        return False
    return True


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         bias: torch.Tensor | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> torch.Tensor:
    """The fused output layer and loss: Liger Kernel's on a GPU where it is installed, else the
    chunked torch version here. Both give the mean over the targets that are not ignored."""
    if liger_available(hidden):
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

        # By keyword: the positional order of Liger's function has changed between its releases.
        out = liger_fused_linear_cross_entropy(hidden, weight, targets, bias=bias, ignore_index=IGNORE_INDEX,
                                               reduction="mean")
        return out[0] if isinstance(out, tuple) else out
    return chunked_linear_cross_entropy(hidden, weight, targets, bias, chunk_rows)
