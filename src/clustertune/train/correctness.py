"""Checks on the first batches that catch a run that would train without learning: each is a
small function that returns None when it holds and a message (what is wrong and the fix) when it
does not, so that a test can break each one on purpose. They cost a few forward passes. The
training loop does not call them yet: they are the pieces of a once-per-run check on the first
batches.

- every batch of the first pass over a sample has trained tokens (a label other than -100);
- packed rows give the loss of their examples run alone (within 1e-4), and an example never
  attends to the one packed before it (changing one changes nothing of the next one's logits);
- a model built from a config starts near the loss of a uniform guess, ln(vocab) (within 10%);
- the adapter trains the modules the recipe targets, and only those;
- the special tokens a chat template writes are single tokens of the tokenizer (else a warning).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

IGNORE = -100
PACKED_TOLERANCE = 1e-4
START_TOLERANCE = 0.10

Forward = Callable[[torch.nn.Module, dict[str, torch.Tensor]], Any]


def trained_tokens_in_every_batch(batches: Iterable[dict[str, torch.Tensor]]) -> str | None:
    """Every batch holds a label that carries the loss (beyond each row's first position, which
    nothing predicts)."""
    for i, batch in enumerate(batches):
        labels = batch.get("labels")
        if labels is not None and labels.dim() == 2 and not bool((labels[:, 1:] != IGNORE).any()):
            return (f"batch {i} has no trained token (every label is -100): the loss is undefined there; "
                    "check data.sft.loss_on and that the chat template renders the assistant turns")
    return None


def _segments(position_ids: torch.Tensor) -> list[tuple[int, int]]:
    """The (start, end) of each example packed in one row: positions restart at 0."""
    starts = torch.nonzero(position_ids == 0).flatten().tolist() + [int(position_ids.numel())]
    return [(a, b) for a, b in zip(starts[:-1], starts[1:]) if b > a]


def _token_losses(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Summed next-token loss over the trained positions of one row, and how many there are."""
    pred, tgt = logits[:-1].float(), labels[1:]
    keep = tgt != IGNORE
    if not bool(keep.any()):
        return torch.zeros(()), 0
    return torch.nn.functional.cross_entropy(pred[keep], tgt[keep], reduction="sum"), int(keep.sum())


def packed_equals_unpacked(model: torch.nn.Module, row: dict[str, torch.Tensor],
                           forward: Forward) -> str | None:
    """One packed row (``input_ids``, ``labels``, ``position_ids``, each of one row) gives the
    same mean loss over its trained tokens as its examples run one by one."""
    ids, labels, pos = row["input_ids"][0], row["labels"][0], row["position_ids"][0]
    segs = _segments(pos)
    if len(segs) < 2:
        return None
    with torch.no_grad():
        packed = forward(model, {"input_ids": ids[None], "position_ids": pos[None]}).logits[0]
        p_sum, p_n = torch.zeros(()), 0
        a_sum, a_n = torch.zeros(()), 0
        for a, b in segs:
            s, n = _token_losses(packed[a:b], labels[a:b])
            p_sum, p_n = p_sum + s, p_n + n
            alone = forward(model, {"input_ids": ids[None, a:b], "position_ids": pos[None, a:b]}).logits[0]
            s, n = _token_losses(alone, labels[a:b])
            a_sum, a_n = a_sum + s, a_n + n
    if not p_n:
        return None
    packed_loss, alone_loss = float(p_sum / p_n), float(a_sum / a_n)
    if abs(packed_loss - alone_loss) > PACKED_TOLERANCE:
        return (f"a packed row's loss is {packed_loss:.6f} but its examples alone give {alone_loss:.6f}: packed "
                "examples see each other; set data.sft.packing=false, or use a model whose attention follows "
                "position_ids")
    return None


def no_attention_across_examples(model: torch.nn.Module, row: dict[str, torch.Tensor],
                                 forward: Forward) -> str | None:
    """Changing the tokens of one packed example moves none of the next example's logits."""
    ids, pos = row["input_ids"][0], row["position_ids"][0]
    segs = _segments(pos)
    if len(segs) < 2:
        return None
    (a, b), (c, d) = segs[0], segs[1]
    changed = ids.clone()
    # The vocabulary from the config: an adapter on the embeddings (LoRA on ``wte``) wraps the
    # embedding layer in one that has no ``num_embeddings``.
    vocab = int(getattr(model.config, "vocab_size", 0) or int(ids.max()) + 1)
    changed[a:b] = (changed[a:b] + 1) % vocab
    with torch.no_grad():
        before = forward(model, {"input_ids": ids[None], "position_ids": pos[None]}).logits[0, c:d]
        after = forward(model, {"input_ids": changed[None], "position_ids": pos[None]}).logits[0, c:d]
    moved = float((before - after).abs().max())
    if moved > PACKED_TOLERANCE:
        return (f"changing one packed example moved the next example's logits by {moved:.2e}: packed examples "
                "attend to each other; set data.sft.packing=false")
    return None


def starts_near_uniform(loss: float, vocab: int) -> str | None:
    """A model built from a config (random weights) starts within 10% of ln(vocab)."""
    expected = math.log(vocab)
    if not math.isfinite(loss) or abs(loss - expected) > START_TOLERANCE * expected:
        return (f"the first loss is {loss:.3f}, far from ln(vocab)={expected:.3f} that a model built from a "
                "config starts at: are the labels aligned with the inputs, and the vocabulary the tokenizer's? "
                "(model.config_overrides.initializer_range sets how random the start is)")
    return None


# What PEFT adds that trains besides the targeted layers' LoRA (DoRA's magnitudes included):
# rows of the embeddings (model.adapter.trainable_token_indices) and whole modules it copies
# (model.adapter.modules_to_save, a classifier's head).
_ADAPTER_OWNED = ("lora_", "trainable_tokens", "modules_to_save")


def adapter_trains_its_targets(model: torch.nn.Module, targets: list[str] | str | None) -> tuple[str | None, int]:
    """Every trainable parameter belongs to an adapter layer on a targeted module, and every
    targeted name has one; returns the problem (or None) and how many parameters train."""
    trainable = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
    count = sum(n for _, n in trainable)
    if not trainable:
        return "no parameter is trainable: the adapter found nothing to wrap (model.adapter.target_modules)", 0
    if targets is None or isinstance(targets, str):  # "all-linear": PEFT's own choice
        return None, count
    stray = [n for n, _ in trainable if not any(mark in n for mark in _ADAPTER_OWNED)
             and not any(f".{t}." in f".{n}." for t in targets)]
    missing = [t for t in targets if not any(f".{t}." in f".{n}." for n, _ in trainable)]
    if stray or missing:
        what = []
        if stray:
            what.append(f"{len(stray)} trainable parameter(s) outside the adapter ({stray[0]})")
        if missing:
            what.append(f"no trainable parameter on {', '.join(missing)}")
        return (f"the adapter does not train what model.adapter.target_modules names: {'; '.join(what)}", count)
    return None, count


def template_tokens_are_single(tokenizer: Any, markers: list[str]) -> str | None:
    """The special markers a chat template writes (``<|im_start|>``...) are each one token; a
    marker split into pieces still trains, but worse and with a template the model never saw
    whole."""
    split = [m for m in markers if len(tokenizer(m, add_special_tokens=False)["input_ids"]) != 1]
    if split:
        return (f"the chat template's marker(s) {', '.join(split)} are not single tokens of the tokenizer; add "
                "them as special tokens (tokenizer.add_special_tokens({'additional_special_tokens': [...]}) and "
                "resize the model's embeddings) or use a template written for this tokenizer")
    return None
