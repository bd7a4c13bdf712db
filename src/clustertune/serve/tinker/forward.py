"""``forward`` and ``forward_backward``: a client's data through its adapter, log-probabilities out,
the loss's gradients into the adapter.

The whole request is one padded batch (right padding: under causal attention a position never
sees the padding after it). The log-probabilities of every target token are returned, but the
loss has a gradient only where its weights (``cross_entropy``) or advantages (the policy losses)
are not zero: in a chat's supervised datum that is the assistant's few tokens. The output layer
and its log-softmax run with a gradient over those positions only; the others are scored once
without one (as :mod:`clustertune.train.sft_loss` does for ``clustertune run``). The loss takes
the same values either way, and its gradient is the same, since it is zero at the others. A
model that changes what its output layer returns (soft-capping, a logit scale) is found by the
two passes disagreeing where both scored, and takes the plain path: every position with a gradient.
"""

from __future__ import annotations

from typing import Any

from clustertune.serve.tinker.lora import TinkerUserError, Trainee
from clustertune.serve.tinker.losses import INPUTS, PER_SEQUENCE, LossError, check, datum_loss, with_gradient


def target_tokens(i: int, inputs: dict[str, Any]) -> Any:
    """Datum ``i``'s ``target_tokens`` as token ids (int64), else :class:`TinkerUserError`: a float
    such as 6.5 would be cut to 6 by the cast, training on a token nobody sent."""
    import numpy as np

    if "target_tokens" not in inputs:
        raise TinkerUserError(f"datum {i}: loss_fn_inputs has no target_tokens")
    targets = np.asarray(inputs["target_tokens"]).reshape(-1)
    if targets.dtype.kind not in "iu":
        raise TinkerUserError(f"datum {i}: loss_fn_inputs['target_tokens'] is {targets.dtype}: send token ids as "
                              "integers (int64 or int32)")
    return targets.astype(np.int64)


def check_targets(data: list[dict[str, Any]]) -> None:
    """Every datum's ``target_tokens`` are token ids (at the edge, before anything is queued)."""
    for i, d in enumerate(data):
        target_tokens(i, d["inputs"])


def _rows(t: Trainee, data: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Each datum's (tokens, targets) as int64 arrays, checked against the base's vocabulary and
    context, else :class:`TinkerUserError` naming the datum."""
    import numpy as np

    rows, limit, vocab = [], t.base.positions, t.base.vocab
    for i, d in enumerate(data):
        tokens = np.asarray(d["tokens"], dtype=np.int64).reshape(-1)
        targets = target_tokens(i, d["inputs"])
        if len(targets) != len(tokens):
            raise TinkerUserError(f"datum {i}: target_tokens has {len(targets)} entries and model_input {len(tokens)} "
                                  "tokens: give one target per input position (the input shifted by one)")
        if not len(tokens):
            raise TinkerUserError(f"datum {i}: model_input is empty")
        if limit is not None and len(tokens) > limit:
            raise TinkerUserError(f"datum {i}: {len(tokens)} tokens; {t.base.ref} takes at most {limit} positions")
        both = np.concatenate([tokens, targets])
        outside = (both < 0) | (both >= vocab)
        if outside.any():
            raise TinkerUserError(f"datum {i}: token id {int(both[outside.argmax()])} is outside the vocabulary of "
                                  f"{t.base.ref} (0..{vocab - 1})")
        rows.append((tokens, targets))
    return rows


class _Keep:
    """A pre-hook on the output layer: while :attr:`index` is set, the layer gets the hidden states
    of those flat positions only, and :attr:`hidden` keeps all of them."""

    def __init__(self, head: Any):
        self.index: Any = None
        self.hidden: Any = None
        self.handle = head.register_forward_pre_hook(self._keep)

    def _keep(self, module: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if self.index is None:
            return None
        self.hidden = args[0]
        return (args[0].reshape(-1, args[0].shape[-1]).index_select(0, self.index), *args[1:])


def _scores(logits: Any, targets: Any) -> Any:
    """The log-probability of each target token (``targets`` shaped as ``logits`` without its last
    axis): its logit less the log of the sum over the vocabulary, without a whole log-softmax."""
    import torch

    logits = logits.float()
    return logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)


def _logits(model: Any, inputs: dict[str, Any]) -> Any:
    # use_cache=False: by default GPT-2 and Llama build a KV cache in training too (5-7% of a
    # small model's forward and backward, measured), which nothing here reads.
    return model(**inputs, use_cache=False).logits


def _scores_moving(model: Any, inputs: dict[str, Any], wanted: Any, flat: Any) -> Any:
    """Every target's log-probability, with a gradient only at the flat positions ``flat``: the
    output layer runs with one over those alone, and once more without one over every position.
    None where the model changes what its output layer returns (soft-capping, a logit scale):
    the second pass would miss that, so the caller takes the plain path."""
    import torch

    head = model.get_output_embeddings()
    keep = _Keep(head)
    keep.index = flat
    try:
        with torch.enable_grad():
            logits = _logits(model, inputs)
    finally:
        keep.handle.remove()
    if logits.dim() != 2 or logits.shape[0] != flat.numel():
        return None
    moved = _scores(logits, wanted.reshape(-1).index_select(0, flat))
    with torch.no_grad():  # every position's score, for the answer
        picked = _scores(head(keep.hidden), wanted).reshape(-1)
    if not torch.allclose(picked.index_select(0, flat), moved.detach(), rtol=1e-4, atol=1e-5):
        return None
    # The positions the loss moves, with their gradient, in their places.
    return picked.index_put((flat,), moved).reshape(wanted.shape)


def forward_backward(t: Trainee, data: list[dict[str, Any]], loss: str, config: dict[str, Any] | None,
                     backward: bool) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Log-probabilities of each datum's target tokens, the loss summed over the data, and (with
    ``backward``) its gradients added to the adapter's: a later ``optim_step`` applies them.

    ``data``: ``{"tokens": [...], "inputs": {name: numpy array}}`` per datum."""
    import numpy as np
    import torch

    check(loss, config)
    if not data:
        raise TinkerUserError("forward_backward got no data: send at least one Datum")
    rows = _rows(t, data)
    given = []
    for i, d in enumerate(data):
        inputs = {k: np.asarray(v, dtype=np.float32).reshape(-1) for k, v in d["inputs"].items() if k != "target_tokens"}
        try:
            given.append((inputs, with_gradient(loss, inputs, len(rows[i][1]))))
        except LossError as exc:
            raise TinkerUserError(f"datum {i}: {exc}") from None
    lengths = [len(r[0]) for r in rows]
    ids = np.zeros((len(rows), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    wanted = np.zeros_like(ids)  # padding asks for token 0; it is cut away below
    moving = np.zeros(ids.shape, dtype=bool)
    for i, ((tokens, targets), (_, grads)) in enumerate(zip(rows, given)):
        n = len(tokens)
        ids[i, :n], mask[i, :n], wanted[i, :n], moving[i, :n] = tokens, 1, targets, grads
    dev = t.base.device
    wanted_t = torch.from_numpy(wanted).to(dev)
    with t.base.using(t.adapter, training=backward) as model:
        inputs = {"input_ids": torch.from_numpy(ids).to(dev), "attention_mask": torch.from_numpy(mask).to(dev)}
        picked = None
        if backward and not moving.all():
            picked = _scores_moving(model, inputs, wanted_t, torch.from_numpy(np.flatnonzero(moving)).to(dev))
        if picked is None:
            with torch.enable_grad() if backward else torch.no_grad():
                picked = _scores(_logits(model, inputs), wanted_t)
        with torch.enable_grad() if backward else torch.no_grad():
            if loss in PER_SEQUENCE:
                total = picked.new_zeros(())
                for i, n in enumerate(lengths):
                    tensors = {k: torch.from_numpy(v).to(dev) for k, v in given[i][0].items()}
                    try:
                        total = total + datum_loss(loss, picked[i, :n], tensors, config)
                    except LossError as exc:
                        raise TinkerUserError(f"datum {i}: {exc}") from None
            else:
                # A sum of one term per token: every datum's tokens at once, in datum order.
                tensors = {k: torch.from_numpy(np.concatenate([g[0][k] for g in given])).to(dev)
                           for k in INPUTS[loss]}
                try:
                    total = datum_loss(loss, picked[torch.from_numpy(mask.astype(bool)).to(dev)], tensors, config)
                except LossError as exc:
                    raise TinkerUserError(str(exc)) from None
        if backward:
            total.backward()
    # One copy to the host for every datum's log-probabilities, not one each.
    host = picked.detach().cpu().numpy()
    return [{"logprobs": host[i, :n]} for i, n in enumerate(lengths)], {"loss:sum": float(total.detach())}
