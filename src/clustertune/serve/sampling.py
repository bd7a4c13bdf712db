"""How the batch draws each request's next token: greedy rows by argmax alone, sampled rows with
their own temperature and top-p.

transformers' continuous batching takes its sampling settings per request only through its
per-request processors, and then runs every one of them on every row of every step: a greedy
request is asked as top-k 1, sorted over the whole vocabulary, cut again by top-p 1, and drawn
with ``multinomial`` (16-23% of a step at 16 clients, benchmarks/RESULTS.md, serving). This
module is one object in their place, with the interface the batch calls
(``ContinuousBatchingLogitsProcessorList``'s): the batch is configured greedy (its own step is
``argmax``), and :class:`BatchSampler` turns only the sampled rows into scores whose argmax is a
draw from their distribution:

- temperature, then top-p (the order ``generate`` applies them), then ``probs / q`` with
  ``q ~ Exponential(1)``: the argmax of that is distributed as the probabilities are (the
  exponential race, equal in law to ``multinomial``), and a greedy row keeps its logits, whose
  argmax is what ``generate`` answers;
- a step whose rows are all greedy does nothing at all. Which rows draw is known on the host
  when the batch is prepared, so no tensor is read back for it. Where the step is captured
  (CUDA graphs) or compiled, no Python branch may depend on the batch, so
  :class:`BatchSampler` built with ``eager=False`` computes every row and keeps the greedy
  ones' logits by ``torch.where``.
"""

from __future__ import annotations

from typing import Any

import torch

# Rows of the int32 storage the batch keeps per step for the processors (floats are stored by
# their bits, as transformers' own processors store them).
_TEMPERATURE, _TOP_P = 0, 1
GREEDY = 0.0


class BatchSampler:
    """The per-step sampling of the served batch (see the module's docstring). Requests name
    ``temperature`` (0: greedy) and ``top_p`` (1: no cut) when they are added."""

    supported_keys: dict[str, type] = {"temperature": float, "top_p": float}
    ignored_keys: set[str] = set()
    tensors_required = 2
    do_processing = True

    def __init__(self, eager: bool = True):
        self.eager = eager
        # The rows (among the step's logits) that draw, and whether any top-p cuts; set when a
        # step is prepared, read by the same step's __call__ (the batch prepares a step and then
        # runs it, one at a time, on its one thread).
        self._drawn: list[int] = []
        self._cuts = False

    def check_kwargs(self, kwargs: dict[str, Any]) -> None:
        for key, value in kwargs.items():
            if key not in self.supported_keys:
                raise ValueError(f"unknown sampling setting {key!r}; this batch reads {sorted(self.supported_keys)}")
            if not isinstance(value, float):
                raise TypeError(f"sampling setting {key!r} must be a float, not {type(value).__name__}")

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        int32_tensor[_TEMPERATURE].copy_(torch.tensor([GREEDY], dtype=torch.float32).view(torch.int32))
        int32_tensor[_TOP_P].copy_(torch.tensor([1.0], dtype=torch.float32).view(torch.int32))

    def prepare_tensor_args(self, requests_in_batch: list[Any], arg_storage: torch.Tensor) -> torch.Tensor:
        # A step's logits are the rows of its requests that draw a token now (a request still
        # reading a long prompt in pieces has none), in batch order.
        settings = [r.state.logit_processor_kwargs for r in requests_in_batch if r.has_new_token]
        temps = [float(s.get("temperature", GREEDY)) for s in settings]
        top_ps = [float(s.get("top_p", 1.0)) for s in settings]
        self._drawn = [i for i, t in enumerate(temps) if t > 0]
        self._cuts = any(top_ps[i] < 1.0 for i in self._drawn)
        # An eager step of greedy rows never reads its arguments: nothing to write, every step.
        if settings and (self._drawn or not self.eager):
            n = len(settings)
            arg_storage[_TEMPERATURE, :n] = torch.tensor(temps, dtype=torch.float32).view(torch.int32)
            arg_storage[_TOP_P, :n] = torch.tensor(top_ps, dtype=torch.float32).view(torch.int32)
        return arg_storage

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, args: torch.Tensor) -> torch.Tensor:
        """Scores (rows = this step's requests, columns = the vocabulary) whose argmax per row is
        that request's next token."""
        rows = scores.size(0)
        temperature = args[_TEMPERATURE, :rows].view(torch.float32)
        top_p = args[_TOP_P, :rows].view(torch.float32)
        if not self.eager:
            drawn = temperature > 0
            draws = _draw(scores, torch.where(drawn, temperature, 1.0), top_p, cut=True)
            return torch.where(drawn.unsqueeze(-1), draws, scores)
        if not self._drawn:  # greedy rows only: the batch's own argmax is the answer
            return scores
        if len(self._drawn) == rows:
            return _draw(scores, temperature, top_p, cut=self._cuts)
        index = torch.tensor(self._drawn, device=scores.device)
        out = scores.clone()
        out[index] = _draw(scores[index], temperature[index], top_p[index], cut=self._cuts)
        return out


def _draw(scores: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, cut: bool) -> torch.Tensor:
    """Non-negative scores whose per-row argmax is a draw from ``softmax(scores / temperature)``
    cut to its ``top_p`` nucleus."""
    probs = torch.softmax(scores / temperature.unsqueeze(-1), dim=-1)
    if cut:
        # The smallest set of most likely tokens whose probability reaches top_p: a token is
        # dropped when the tokens more likely than it already reach it (the most likely always stays).
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop = (before >= top_p.unsqueeze(-1)) & (top_p < 1.0).unsqueeze(-1)  # 1: no cut, whatever the rounding
        probs = probs.masked_fill(drop.scatter(-1, order, drop), 0.0)
    # The exponential race: argmax(p_i / q_i), q_i ~ Exp(1) i.i.d., is i with probability p_i / sum(p)
    # (no renormalising needed).
    return probs / torch.empty_like(probs).exponential_()
