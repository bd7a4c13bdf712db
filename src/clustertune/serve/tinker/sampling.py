"""Sampling from a base, with or without a client's adapter: the request's settings read and checked
(``read_sampling``), then greedy or seeded draws token by token with the model's cache, stopping at a
stop sequence or the end of text; prompt log-probabilities on request."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.serve.protocol import ApiError, bad, check_count, check_sampling, check_stops, shown
from clustertune.serve.tinker.lora import Base, TinkerUserError


@dataclass(frozen=True)
class Sampling:
    max_tokens: int = 16
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0
    seed: int | None = None
    stop_tokens: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    end_of_text: bool = False  # no stop given: the base's end-of-text ids are to be filled in


TopK = list[list[tuple[int, float]] | None]


@dataclass(frozen=True)
class Sampler:
    """A sampling client of the service: a base, with a client's adapter or alone."""
    sampler_id: str
    base: str  # the base as the client named it
    adapter_dir: Path | None  # None: the base alone
    model_path: str | None


def sample(base: Base, adapter: str | None, prompt: list[int], n: int, s: Sampling, prompt_logprobs: bool,
           topk_prompt: int = 0, topk_sample: int = 0) -> tuple[list[dict[str, Any]], list[float | None] | None, TopK | None]:
    """``n`` continuations of ``prompt``: tokens, each sampled token's log-probability (the
    model's, before temperature and truncation) and why each stopped; if asked, the prompt's
    own log-probabilities (None for its first token); and with ``topk_prompt`` k > 0, the k
    likeliest tokens at each prompt position with their log-probabilities, likeliest first
    (None for the first position, which has no context). ``topk_sample`` k > 0: each sequence
    also holds (``"topk"``) the k likeliest tokens of the distribution each of its tokens was
    drawn from (the model's, as its log-probability)."""
    import torch

    if not prompt:
        raise TinkerUserError("the prompt is empty: give at least one token")
    if n < 1:
        raise TinkerUserError(f"num_samples {n}: at least 1")
    bad = [x for x in prompt if not 0 <= x < base.vocab]
    if bad:
        raise TinkerUserError(f"prompt token id {bad[0]} is outside the vocabulary (0..{base.vocab - 1})")
    for name, k in (("topk_prompt_logprobs", topk_prompt), ("topk_sample_logprobs", topk_sample)):
        if not 0 <= k <= base.vocab:
            raise TinkerUserError(f"{name} {k}: from 0 to the vocabulary's {base.vocab} tokens")
    limit = base.positions or (len(prompt) + s.max_tokens)
    if len(prompt) >= limit:
        raise TinkerUserError(f"the prompt has {len(prompt)} tokens; {base.ref} takes at most {limit} positions")
    steps = min(s.max_tokens, limit - len(prompt))
    gen = torch.Generator(device="cpu")
    gen.manual_seed(s.seed if s.seed is not None else int.from_bytes(os.urandom(4), "little"))
    dev = base.device
    out_tokens: list[list[int]] = [[] for _ in range(n)]
    out_lp: list[list[float]] = [[] for _ in range(n)]
    out_topk: list[list[list[tuple[int, float]]]] = [[] for _ in range(n)]
    reasons = ["length"] * n
    done = [False] * n
    first: list[float | None] | None = None
    topk: TopK | None = None
    with base.using(adapter) as model, torch.inference_mode():
        cache_keyword = _cache_keyword(model)
        ids = torch.tensor([prompt], device=dev)
        out = model(input_ids=ids, use_cache=True)
        if prompt_logprobs or topk_prompt:
            # Position i is scored by the logits of position i - 1: the first token has no context.
            lp = torch.log_softmax(out.logits[0, :-1].float(), dim=-1)
            if prompt_logprobs:
                first = [None, *lp.gather(-1, ids[0, 1:, None])[:, 0].cpu().tolist()]
            if topk_prompt:
                topk = [None, *_top(lp, topk_prompt)]
        logits = out.logits[:, -1].float().expand(n, -1)
        past = _cache_of(out)
        if n > 1:
            past = _repeat_cache(past, n)
        for step in range(steps):
            if not bool(torch.isfinite(logits).all()):
                # The weights give NaN or infinite outputs (trained with a learning rate far too
                # large): there is no distribution to draw from.
                raise TinkerUserError(f"sampling step {step}: the model's outputs are not finite (NaN or infinite); "
                                      "these weights are broken (a learning rate too large?): sample from an earlier "
                                      "checkpoint")
            logp = torch.log_softmax(logits, dim=-1)
            nxt = _draw(logits, s, gen)
            chosen = logp.gather(-1, nxt[:, None])[:, 0].cpu().tolist()
            tops = _top(logp, topk_sample) if topk_sample else None
            for i, tok in enumerate(nxt.cpu().tolist()):
                if done[i]:
                    continue
                out_tokens[i].append(tok)
                out_lp[i].append(chosen[i])
                if tops is not None:
                    out_topk[i].append(tops[i])
                if tok in s.stop_tokens or (s.stop_strings and _ends_in_stop(base.tokenizer, out_tokens[i], s.stop_strings)):
                    done[i], reasons[i] = True, "stop"
            if all(done) or step == steps - 1:
                break
            out = model(input_ids=nxt[:, None].to(dev), use_cache=True, **{cache_keyword: past})
            past = _cache_of(out)
            logits = out.logits[:, -1].float()
    sequences = [{"tokens": out_tokens[i], "logprobs": out_lp[i], "stop_reason": reasons[i],
                  **({"topk": out_topk[i]} if topk_sample else {})} for i in range(n)]
    return sequences, first, topk


def _top(logp: Any, k: int) -> list[list[tuple[int, float]]]:
    """Per row of ``logp``, its ``k`` likeliest (token, log-probability) pairs, likeliest first."""
    import torch

    values, indices = torch.topk(logp, k, dim=-1)  # sorted
    return [list(zip(i, v)) for i, v in zip(indices.cpu().tolist(), values.cpu().tolist())]


def _cache_of(out: Any) -> Any:
    # transformers 5.2x names the key/value cache ``cache``; earlier releases ``past_key_values``.
    return out.cache if "cache" in out else out.past_key_values


def _cache_keyword(model: Any) -> str:
    """The keyword the model's forward takes its key/value cache by (``cache`` in transformers
    5.2x, ``past_key_values`` before), read from the model's own class: under PEFT's wrapper,
    whose forward takes ``**kwargs``, the base model's."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _forward_keyword(type(inner))


@functools.lru_cache(maxsize=None)
def _forward_keyword(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def _repeat_cache(past: Any, n: int) -> Any:
    if hasattr(past, "batch_repeat_interleave"):
        past.batch_repeat_interleave(n)
        return past
    return tuple(tuple(t.repeat_interleave(n, dim=0) for t in layer) for layer in past)


def _draw(logits: Any, s: Sampling, gen: Any) -> Any:
    import torch

    if s.temperature <= 0:
        return logits.argmax(dim=-1)
    scaled = logits / s.temperature
    if s.top_k and s.top_k > 0:
        kth = torch.topk(scaled, min(s.top_k, scaled.shape[-1]), dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, -math.inf)
    if 0 < s.top_p < 1:
        sorted_logits, order = torch.sort(scaled, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop = cum - torch.softmax(sorted_logits, dim=-1) > s.top_p
        sorted_logits = sorted_logits.masked_fill(drop, -math.inf)
        scaled = torch.full_like(scaled, -math.inf).scatter(-1, order, sorted_logits)
    probs = torch.softmax(scaled, dim=-1).cpu()
    return torch.multinomial(probs, 1, generator=gen)[:, 0].to(logits.device)


def _ends_in_stop(tokenizer: Any, tokens: list[int], stops: tuple[str, ...]) -> bool:
    tail = tokenizer.decode(tokens[-16:], skip_special_tokens=False)
    return any(stop in tail for stop in stops)




# Sequences one sample request may ask for (RL loops draw a group per prompt).
MAX_SAMPLES = 128


SAMPLING_KEYS = frozenset({"max_tokens", "temperature", "top_k", "top_p", "seed", "stop"})  # the SDK's SamplingParams


def prompt_tokens(prompt: dict[str, Any]) -> list[int]:
    """The token ids of a ``ModelInput`` as JSON (``{"chunks": [{"type": "encoded_text", "tokens": [...]}]}``)."""
    chunks = prompt.get("chunks", [])
    if not isinstance(chunks, list):
        raise TinkerUserError(f"prompt.chunks: must be a list of chunks, not {shown(chunks)}")
    out: list[int] = []
    for i, chunk in enumerate(chunks):
        if not isinstance(chunk, dict):
            raise TinkerUserError(f"prompt.chunks[{i}]: must be an object (an EncodedTextChunk), not {shown(chunk)}")
        if chunk.get("type", "encoded_text") != "encoded_text":
            raise TinkerUserError(f"prompt.chunks[{i}]: a {shown(chunk.get('type'))} chunk; this server samples text "
                                  "models only (encoded_text)")
        tokens = chunk.get("tokens", [])
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise TinkerUserError(f"prompt.chunks[{i}].tokens: must be a list of token ids (whole numbers)")
        out.extend(tokens)
    return out


def read_sampling(body: dict[str, Any]) -> tuple[int, Sampling]:
    """``num_samples`` and ``sampling_params``, checked by the rules of the OpenAI routes
    (:func:`~clustertune.serve.protocol.check_sampling`: ``max_tokens`` at least 1, ``temperature``
    from 0 to 2, ``top_p`` from 0 to 1, ``seed`` from 0 to 2**32 - 1, every number finite), with
    Tinker's own ``top_k`` (-1 or 0: no cut) and ``stop`` (strings or token ids, not both;
    absent: the base's end of text, filled in once the base is known by :func:`with_end_of_text`).
    A bad one raises :class:`TinkerUserError` naming it."""
    p = body.get("sampling_params")
    if p is None:
        p = {}
    if not isinstance(p, dict):
        raise TinkerUserError("sampling_params: must be an object (the SDK's SamplingParams)")
    unknown = sorted(set(p) - SAMPLING_KEYS)
    if unknown:
        raise TinkerUserError(f"sampling_params.{unknown[0]}: not a sampling parameter this server reads "
                              f"({', '.join(sorted(SAMPLING_KEYS))}); leave it out")
    try:
        n = check_count(body.get("num_samples"), "num_samples", 1, MAX_SAMPLES) or 1
        checked = check_sampling(p, prefix="sampling_params.")
        top_k = p.get("top_k")
        if top_k is not None and top_k not in (-1, 0):
            check_count(top_k, "sampling_params.top_k", 1)
        stop = p.get("stop")
        strings: tuple[str, ...] = ()
        tokens: tuple[int, ...] | None = None
        if isinstance(stop, list) and stop and all(isinstance(x, int) and not isinstance(x, bool) for x in stop):
            bad_ids = [x for x in stop if x < 0]
            if bad_ids:
                raise bad("sampling_params.stop", f"token id {bad_ids[0]} is negative")
            tokens = tuple(stop)
        elif stop == []:
            tokens = ()  # nothing stops it but max_tokens (the SDK's meaning of [])
        elif stop is not None:
            try:
                strings = check_stops(stop, "sampling_params.stop", None)
            except ApiError:
                raise bad("sampling_params.stop", "must be a string, a list of strings or a list of token ids "
                                                  "(not a mix)") from None
    except ApiError as exc:
        raise TinkerUserError(exc.message) from None
    # 16 tokens where max_tokens is not given, as the SDK's documentation has it.
    return n, Sampling(max_tokens=checked.max_tokens or 16, temperature=checked.temperature,
                            top_k=int(top_k or -1), top_p=checked.top_p, seed=checked.seed,
                            stop_tokens=tokens if tokens is not None else (), stop_strings=strings,
                            end_of_text=tokens is None and not strings)


def with_end_of_text(s: Sampling, base: Base) -> Sampling:
    """``s`` with the base's end-of-text ids as its stop tokens, where ``stop`` was not given."""
    if not s.end_of_text:
        return s
    eos = base.tokenizer.eos_token_id
    gen = getattr(base._plain().generation_config, "eos_token_id", None)
    tokens = tuple(sorted({x for x in (eos, *(gen if isinstance(gen, list) else [gen])) if x is not None}))
    return dataclasses.replace(s, stop_tokens=tokens, end_of_text=False)
