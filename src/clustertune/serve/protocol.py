"""The OpenAI wire format: requests read into typed values, answers and errors written back.

A request body is checked field by field before anything is generated; a bad field is a
:class:`ApiError` with status 400 naming it (``param``), in the shape OpenAI's clients parse:
``{"error": {"message", "type", "param", "code"}}``. Fields that change nothing about an answer
(``user``, ``metadata``, ``store``...) are accepted and ignored; fields that would change it are
honoured or, where the server cannot (``logit_bias``, ``presence_penalty`` other than 0, tools,
audio...), refused by name, as is a field OpenAI's protocol does not have: never silently ignored.

The sampling rules (:func:`check_sampling`) are shared with the Tinker API's ``sampling_params``.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant", "developer")
MAX_N = 16
MAX_TOP_LOGPROBS = 20
MAX_STOPS = 4


class ApiError(Exception):
    """An error answered in OpenAI's shape with ``status``."""

    def __init__(self, status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = status, message, param, kind, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param}: {message}", param=param)


@dataclass(frozen=True)
class Sampled:
    """How one request's answers are drawn (OpenAI's names and defaults)."""

    max_tokens: int | None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    n: int = 1
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def exact(self) -> bool:
        """Drawn one request at a time with ``generate`` (see :mod:`clustertune.serve.engine`)."""
        return self.seed is not None or self.logprobs


@dataclass(frozen=True)
class Ask:
    """One request: the model named, what it reads (a conversation or a plain text) and how to answer."""

    model: str
    sampled: Sampled
    stream: bool
    include_usage: bool
    messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:24])
    created: int = field(default_factory=lambda: int(time.time()))


# A seed seeds Python's, NumPy's and torch's generators; NumPy takes 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1
# Temperatures from 0 up to this are greedy: float32 logits divided by 1e-30 overflow already.
GREEDY_BELOW = 1e-5

# What each route reads. A field not listed is refused by name (OpenAI's own server answers
# "Unrecognized request argument"); listed fields that change an answer and that this server
# cannot honour are refused unless neutral (see _refuse_unhonoured).
_SAMPLING_FIELDS = {"model", "max_tokens", "temperature", "top_p", "stop", "seed", "n", "stream", "stream_options",
                    "logprobs", "presence_penalty", "frequency_penalty", "logit_bias", "user"}
CHAT_FIELDS = frozenset(_SAMPLING_FIELDS | {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "functions", "tool_choice", "function_call",
    "parallel_tool_calls", "response_format", "metadata", "store", "service_tier", "safety_identifier",
    "prompt_cache_key", "modalities", "audio", "prediction", "reasoning_effort", "web_search_options", "verbosity"})
COMPLETION_FIELDS = frozenset(_SAMPLING_FIELDS | {"prompt", "echo", "best_of", "suffix"})


def shown(v: Any, most: int = 60) -> str:
    """``repr(v)`` cut to ``most`` characters, for messages (a body may hold a 4,000-digit number)."""
    text = repr(v)
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def check_number(v: Any, key: str, default: float, lo: float, hi: float) -> float:
    """``v`` as a finite number from ``lo`` to ``hi`` (``default`` when absent)."""
    if v is None:
        return default
    # The range is compared first: Python compares a huge int with a float exactly, where
    # math.isfinite would have to convert it (OverflowError past 1.8e308). NaN fails both.
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi or not math.isfinite(v):
        raise bad(key, f"must be a number from {lo:g} to {hi:g}, not {shown(v)}")
    return float(v)


def check_count(v: Any, key: str, lo: int, hi: int | None = None) -> int | None:
    """``v`` as a whole number from ``lo`` (to ``hi``), None when absent."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        raise bad(key, f"must be a whole number from {lo}" + (f" to {hi}" if hi is not None else " up") +
                  f", not {shown(v)}")
    return v


def check_seed(v: Any, key: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_SEED:
        raise bad(key, f"must be a whole number from 0 to {MAX_SEED} (2**32 - 1), not {shown(v)}")
    return v


def check_text(v: str, key: str) -> str:
    """``v`` unless it holds a lone surrogate (JSON's ``"\\ud800"`` escape reads as one): that is no
    Unicode text, and no tokenizer can encode it."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad(key, f"holds {exc.object[exc.start:exc.end]!r} at position {exc.start}, half of a UTF-16 "
                       "surrogate pair: not text; send the whole character") from None
    return v


def check_stops(v: Any, key: str, most: int | None = MAX_STOPS) -> tuple[str, ...]:
    """Stop strings: one non-empty text or a list of them (at most ``most``)."""
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else v
    if (not isinstance(items, list) or (most is not None and len(items) > most)
            or not all(isinstance(s, str) and s for s in items)):
        raise bad(key, "must be a non-empty string or a list of " + (f"at most {most} of them" if most else "them"))
    return tuple(items)


@dataclass(frozen=True)
class SamplingFields:
    """The sampling settings both servers take, checked by :func:`check_sampling`."""

    max_tokens: int | None
    temperature: float
    top_p: float
    seed: int | None
    n: int


def check_sampling(body: dict[str, Any], *, prefix: str = "", max_tokens_keys: tuple[str, ...] = ("max_tokens",),
                   n_key: str = "n", max_n: int = MAX_N) -> SamplingFields:
    """The rules both servers hold sampling settings to (OpenAI's routes, and the Tinker API's
    ``sampling_params``, named with ``prefix``): a length of at least 1 token, a temperature from
    0 (greedy) to 2, top-p from 0 to 1 (0 and 1: no cut), a seed from 0 to 2**32 - 1, from 1 to
    ``max_n`` answers; every number finite. A temperature under :data:`GREEDY_BELOW` samples
    greedily, as 0 does. A bad one is a 400 :class:`ApiError` naming it."""
    max_tokens = None
    for key in max_tokens_keys:
        max_tokens = check_count(body.get(key), prefix + key, 1)
        if max_tokens is not None:
            break
    temperature = check_number(body.get("temperature"), prefix + "temperature", 1.0, 0.0, 2.0)
    if temperature < GREEDY_BELOW:
        # The logits divided by a temperature this small overflow (inf, then NaN probabilities,
        # which stop the whole batch); the distribution it asks for is the greedy one anyway.
        temperature = 0.0
    return SamplingFields(max_tokens=max_tokens, temperature=temperature,
                          top_p=check_number(body.get("top_p"), prefix + "top_p", 1.0, 0.0, 1.0) or 1.0,
                          seed=check_seed(body.get("seed"), prefix + "seed"),
                          n=check_count(body.get(n_key), prefix + n_key, 1, max_n) or 1)


def _refuse_unhonoured(body: dict[str, Any], known: frozenset[str]) -> None:
    """Refuse, by name, every field that would change the answer and that this server would
    otherwise ignore, and every field the route does not have."""
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise bad(unknown[0], "is not a field this server reads (clustertune serve); leave it out")
    for key in ("presence_penalty", "frequency_penalty"):
        v = body.get(key)
        if v not in (None, 0, 0.0):
            raise bad(key, "is not supported by this server; leave it out or set it to 0")
    if body.get("logit_bias") not in (None, {}):
        raise bad("logit_bias", "is not supported by this server; leave it out")
    if body.get("tools") or body.get("functions"):
        raise bad("tools", "tool calls are not supported by this server")
    for key in ("tool_choice", "function_call"):
        if body.get(key) not in (None, "none"):
            raise bad(key, "tool calls are not supported by this server; leave it out")
    fmt = body.get("response_format")
    if fmt not in (None, {"type": "text"}) and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise bad("response_format", "only {\"type\": \"text\"} is supported by this server")
    if body.get("modalities") not in (None, ["text"]):
        raise bad("modalities", "only [\"text\"] is supported by this server")
    for key in ("audio", "prediction", "reasoning_effort", "web_search_options", "verbosity"):
        if body.get(key) is not None:
            raise bad(key, "is not supported by this server; leave it out")


def _sampled(body: dict[str, Any], chat: bool) -> Sampled:
    _refuse_unhonoured(body, CHAT_FIELDS if chat else COMPLETION_FIELDS)
    fields = check_sampling(body, max_tokens_keys=("max_completion_tokens", "max_tokens") if chat else ("max_tokens",))
    if chat:
        logprobs = body.get("logprobs")
        if logprobs is not None and not isinstance(logprobs, bool):
            raise bad("logprobs", f"must be true or false, not {shown(logprobs)}")
        top = check_count(body.get("top_logprobs"), "top_logprobs", 0, MAX_TOP_LOGPROBS) or 0
        if top and not logprobs:
            raise bad("top_logprobs", "needs \"logprobs\": true")
    else:  # completions: logprobs is the number of alternatives (0..5)
        k = check_count(body.get("logprobs"), "logprobs", 0, 5)
        logprobs, top = k is not None, k or 0
    return Sampled(max_tokens=fields.max_tokens, temperature=fields.temperature, top_p=fields.top_p, seed=fields.seed,
                   n=fields.n, stop=check_stops(body.get("stop"), "stop"), logprobs=bool(logprobs), top_logprobs=top)


def _stream(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("stream", f"must be true or false, not {shown(stream)}")
    # None is OpenAI's "not given"; [] or "" are not (falsy, they passed as no options before).
    opts = body.get("stream_options")
    if opts is None:
        opts = {}
    if not isinstance(opts, dict):
        raise bad("stream_options", "must be an object such as {\"include_usage\": true}")
    unknown = sorted(set(opts) - {"include_usage"})
    if unknown:
        raise bad(f"stream_options.{unknown[0]}", "not a stream option this server reads (include_usage); leave "
                                                  "it out")
    usage = opts.get("include_usage", False)
    # bool("false") is True: a string would switch usage on.
    if usage is not None and not isinstance(usage, bool):
        raise bad("stream_options.include_usage", f"must be true or false, not {shown(usage)}")
    return stream, bool(usage)


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "name the model (GET /v1/models lists it)")
    return model


def _content(v: Any, where: str) -> str:
    if isinstance(v, str):
        return check_text(v, where)
    if isinstance(v, list):  # content parts: text only
        parts = []
        for i, p in enumerate(v):
            if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                raise bad(f"{where}[{i}]", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported")
            parts.append(check_text(p["text"], f"{where}[{i}].text"))
        return "".join(parts)
    raise bad(where, "must be text")


def read_chat(body: Any) -> Ask:
    """A ``POST /v1/chat/completions`` body, checked."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("messages", "must be a non-empty list of {\"role\", \"content\"} turns")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise bad(f"messages[{i}].role", f"must be one of {', '.join(ROLES)}")
        role = "system" if m["role"] == "developer" else m["role"]
        turns.append({"role": role, "content": _content(m.get("content"), f"messages[{i}].content")})
    stream, usage = _stream(body)
    return Ask(model=_model(body), sampled=_sampled(body, chat=True), stream=stream, include_usage=usage, messages=turns)


def read_completion(body: Any) -> Ask:
    """A ``POST /v1/completions`` body, checked (one prompt: a text, or a list holding one)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad("prompt", "must be one text (token-id prompts and several prompts per request are not supported)")
    check_text(prompt, "prompt")
    if body.get("echo"):
        raise bad("echo", "is not supported by this server")
    if body.get("best_of") not in (None, 1):
        raise bad("best_of", "is not supported by this server; use n")
    if body.get("suffix"):
        raise bad("suffix", "is not supported by this server")
    stream, usage = _stream(body)
    return Ask(model=_model(body), sampled=_sampled(body, chat=False), stream=stream, include_usage=usage, prompt=prompt)


@dataclass
class Choice:
    """One answer as it is finished: its text, why it ended and its tokens' log-probabilities."""

    index: int
    text: str = ""
    finish_reason: str | None = None
    tokens: int = 0
    logprobs: list[dict[str, Any]] = field(default_factory=list)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def chat_logprobs(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": entries, "refusal": None}


def completion_logprobs(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The legacy completions shape: parallel lists, and each position's alternatives as a dict."""
    offsets, pos = [], 0
    for e in entries:
        offsets.append(pos)
        pos += len(e["token"])
    return {"tokens": [e["token"] for e in entries], "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]} for e in entries],
            "text_offset": offsets}
