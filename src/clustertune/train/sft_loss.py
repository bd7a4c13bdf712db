"""The SFT loss on trained tokens only: the output layer sees just the positions that have a label.

An SFT batch trains on the assistant's tokens; the prompt's positions carry label -100. The
model's own forward projects every position onto the whole vocabulary and takes a log-softmax
over it before the loss drops most of them again: with a small model that projection (and its
backward) is one of the largest costs of a step. :class:`TrainedPositions` puts a pre-hook on
the output layer that, while a batch's positions are set, hands it the hidden states of those
positions only, as one ``(n, hidden)`` matrix; the loss is then the mean cross-entropy over
them, the same number the model computes from full logits and shifted labels.

The hook sits on the bare model's output layer, so it works through whatever wraps the model
(DDP, FSDP, DeepSpeed): their forward is still the one called. Outside :func:`sft_forward`
(generation, saving, a user's own calls) it does nothing.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from clustertune.train.chunked_loss import linear_cross_entropy

IGNORE_INDEX = -100


class TrainedPositions:
    """A pre-hook on ``model``'s output layer that keeps only the flat positions in :attr:`index`.

    ``fused`` (``train.fused_loss``): while :attr:`targets` is set, the output layer returns the
    mean cross-entropy of those positions against the targets instead of their logits, computed
    together a chunk of rows at a time (:mod:`clustertune.train.chunked_loss`). Its forward is
    replaced on the instance, so the wrappers' hooks around it (FSDP's and ZeRO-3's gathering
    of the weight) still run."""

    def __init__(self, model: torch.nn.Module, fused: bool = False):
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if head is None:
            raise ValueError(f"{type(model).__name__} has no output embeddings to compute an SFT loss with")
        self.index: torch.Tensor | None = None
        self.targets: torch.Tensor | None = None
        self.returned: torch.Tensor | None = None  # the fused loss the output layer gave this forward
        self.head = head
        self.handle = head.register_forward_pre_hook(self._keep)
        # An adapter's wrapper around the output layer computes more than weight and bias: unfused.
        self.fused = fused and type(head) is torch.nn.Linear
        if self.fused:
            head.forward = self._fused_forward  # type: ignore[method-assign]

    def _keep(self, module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if self.index is None:
            return None
        hidden = args[0]
        return (hidden.reshape(-1, hidden.shape[-1]).index_select(0, self.index), *args[1:])

    def _fused_forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.targets is None:  # generation, saving, a user's own call: the layer as it is
            return torch.nn.Linear.forward(self.head, hidden)
        self.returned = linear_cross_entropy(hidden, self.head.weight, self.targets, self.head.bias)
        return self.returned

    def remove(self) -> None:
        self.handle.remove()
        if self.fused:
            del self.head.forward  # the class's own forward again


class SFTOutput:
    """What the loop reads from a forward: the loss (and the logits of the trained positions)."""

    def __init__(self, loss: torch.Tensor, logits: torch.Tensor | None):
        self.loss, self.logits = loss, logits


def trained_targets(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The flat positions (row-major over ``labels``' shape) whose next token is a label, and
    those labels. (On a GPU, finding them reads their count on the host: one sync.)"""
    after = torch.zeros_like(labels, dtype=torch.bool)
    after[:, :-1] = labels[:, 1:] != IGNORE_INDEX
    index = after.reshape(-1).nonzero().squeeze(1)
    return index, labels.reshape(-1).index_select(0, index + 1)


def sft_forward(model: torch.nn.Module, batch: dict[str, torch.Tensor], kept: TrainedPositions) -> SFTOutput:
    """The mean cross-entropy over ``batch``'s trained tokens, with logits for those only.

    No KV cache (training needs none, and packed rows need its absence: see ``loop.forward``).
    A batch without any label has loss 0 (times the logits, so it still reaches the graph)."""
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    index, targets = trained_targets(batch["labels"])
    kept.index = index
    kept.targets = targets if kept.fused else None
    try:
        out = model(**inputs, use_cache=False)
    finally:
        kept.index = kept.targets = None
    if kept.fused:
        loss, kept.returned = kept.returned, None
        if loss is None or out.logits is not loss:
            raise RuntimeError(f"{type(model).__name__} changed its output layer's result (soft-capping, scaling): "
                               "the fused loss cannot be used with it; set train.fused_loss=false")
        return SFTOutput(loss, None)
    logits = out.logits
    if logits.dim() != 2 or logits.shape[0] != index.numel():
        raise RuntimeError(f"{type(model).__name__} reshaped its output layer's result ({tuple(logits.shape)}); "
                           "the SFT loss needs the logits of the trained positions as the output layer returns them")
    loss = F.cross_entropy(logits.float(), targets, reduction="sum") / max(int(targets.numel()), 1)
    return SFTOutput(loss, logits)
