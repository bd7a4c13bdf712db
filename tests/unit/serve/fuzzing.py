"""What the fuzz tests of both HTTP APIs share: hostile JSON values and bodies (Hypothesis
strategies), and a harness that sends one request at a time to the ASGI app in-process and holds
the server to what every answer must satisfy (no 500, no exception out of the app, no error or
traceback in the log, /health still answering).

The number of requests per API is ``$CLUSTERTUNE_FUZZ_EXAMPLES`` (a CI-sized default otherwise);
the seed is fixed, so a run is repeatable and a failure reproduces.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import traceback
from collections import Counter
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES_ENV = "CLUSTERTUNE_FUZZ_EXAMPLES"
CI_EXAMPLES = 200
REQUEST_TIMEOUT_S = 120.0


def examples() -> int:
    raw = os.environ.get(EXAMPLES_ENV, "")
    if not raw:
        return CI_EXAMPLES
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"${EXAMPLES_ENV}={raw!r}: give the number of requests per API (5000 for a long run)")
    return int(raw)


def fuzz_settings() -> settings:
    """A fixed seed and no example database: the same requests on every run and machine."""
    return settings(max_examples=examples(), derandomize=True, database=None, deadline=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# -- hostile values -------------------------------------------------------------------------------

ODD_TEXTS = ["", " ", "\x00", "\ud800", "\udfff", "a\ud83d", "\u202e\u2066", "\uffff", "\U0010ffff", "\r\n",
             "<|im_end|>", "<|im_start|>", "{{ raise_exception('x') }}", "%s%n", "../../etc/passwd", "NaN",
             "tinker://", "x" * 300]
ODD_NUMBERS = [0, -1, 1, 2**31, -(2**31) - 1, 2**32, 2**63, -(2**63), 2**64, 10**30, -(10**30), 10**400, 0.5, -0.0,
               1e-320, 5e-324, 1e-300, 1e300, 1.7976931348623157e308, math.nan, math.inf, -math.inf]

# Every code point, lone surrogates included (JSON escapes them; the server must not choke on one).
any_char = st.characters(exclude_categories=())
texts = st.one_of(st.text(any_char, max_size=20), st.sampled_from(ODD_TEXTS))
long_texts = st.builds(lambda s, k: s * k, st.text(any_char, min_size=1, max_size=4), st.integers(100, 5000))
# Whole numbers past float's range (JSON has no limit; Python reads them exactly, up to 4,300 digits).
beyond_float = st.builds(lambda sign, n: sign * n, st.sampled_from([1, -1]), st.integers(2**1024, 10**1000))
numbers = st.one_of(st.sampled_from(ODD_NUMBERS), st.integers(), st.floats(), beyond_float)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
hostile = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(texts, inner, max_size=4)), max_leaves=12)
# What replaces a field's good value: half the time one of the odd constants outright (one_of
# picks its branches evenly, and deep inside `hostile` they would be rare).
any_value = st.one_of(st.sampled_from(ODD_NUMBERS), st.sampled_from([*ODD_TEXTS, None, True, False, [], {}, [None]]),
                      hostile, long_texts)
# A number field's wrong values: odd numbers and numbers past float's range most often.
NUMBER_EDGES = st.one_of(st.sampled_from(ODD_NUMBERS), beyond_float, st.integers(), st.floats(), any_value)


def dumps(value: Any) -> bytes:
    """JSON as Python writes it: NaN and Infinity as bare words, lone surrogates escaped."""
    return json.dumps(value, allow_nan=True).encode()


@st.composite
def raw_body(draw: st.DrawFn, prefix: bytes = b"") -> bytes:
    """Bodies that are not clean JSON objects: bytes, non-UTF-8, deep nesting, huge literals,
    other encodings, truncations. ``prefix`` opens an object (``{"model": "x", "messages": ``)
    for the nested and literal cases, so they reach a field."""
    kind = draw(st.sampled_from(["bytes", "not-utf8", "deep", "literal", "utf16", "cut", "value"]))
    if kind == "bytes":
        return draw(st.binary(max_size=400))
    if kind == "not-utf8":
        return prefix + b'"' + draw(st.binary(min_size=1, max_size=20)).replace(b'"', b"") + b'\xff\xfe\xc0"}'
    if kind == "deep":
        depth = draw(st.sampled_from([100, 999, 1001, 5000, 100_000]))
        opener = draw(st.sampled_from([b"[", b'{"a":', b'[{"b":']))
        closer = {b"[": b"]", b'{"a":': b"}", b'[{"b":': b"}]"}[opener]
        return prefix + opener * depth + b"1" + closer * depth + (b"}" if prefix else b"")
    if kind == "literal":
        lit = draw(st.sampled_from([b"NaN", b"-Infinity", b"1e999", b"-1e999", b"9" * 4000, b"9" * 5000,
                                    b"1" + b"0" * 400, b"-0", b"0.0000000000000000000001", b"true", b"null",
                                    b'"\\ud800"', b'"\\u0000"', b"[]", b"{}"]))
        return prefix + lit + (b"}" if prefix else b"")
    if kind == "utf16":
        return json.dumps(draw(hostile)).encode(draw(st.sampled_from(["utf-16", "utf-32", "utf-8-sig"])))
    if kind == "cut":
        whole = dumps(draw(st.dictionaries(texts, hostile, min_size=1, max_size=3)))
        return whole[: draw(st.integers(0, max(0, len(whole) - 1)))]
    return dumps(draw(any_value))


# -- the harness ----------------------------------------------------------------------------------

class _Records(logging.Handler):
    """Log records that say something went wrong: an error, or any record carrying a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.bad: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info or "Traceback (most recent call last)" in str(record.msg):
            self.bad.append(record)


class Harness:
    """One event loop and one client for the whole run: requests go one at a time, each checked."""

    def __init__(self, app: Any, health: str = "/health"):
        self.loop = asyncio.new_event_loop()
        # Exceptions that escape the app are raised here (an unhandled one is a 500 on a real server).
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=True),
                                        base_url="http://fuzz", timeout=REQUEST_TIMEOUT_S)
        self.health = health
        self.records = _Records()
        logging.getLogger().addHandler(self.records)
        self.counts: Counter[str] = Counter()

    def close(self) -> None:
        logging.getLogger().removeHandler(self.records)
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()

    def begin(self) -> None:
        """A new example: what an earlier, failed one left in the log is not this one's."""
        self.records.bad.clear()

    def send(self, method: str, path: str, content: bytes | None = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
        """The answer; an exception out of the app, or no answer in time, fails the test."""
        what = f"{method} {path} {describe(content)} headers={headers}"
        # Header values travel as Latin-1 bytes ("\xb2" too), as a raw client could send them.
        raw_headers = {k: v.encode("latin-1") for k, v in (headers or {}).items()}
        try:
            r = self.loop.run_until_complete(asyncio.wait_for(
                self.client.request(method, path, content=content, headers=raw_headers), REQUEST_TIMEOUT_S))
        except asyncio.TimeoutError:
            raise AssertionError(f"no answer in {REQUEST_TIMEOUT_S:.0f} s to {what}") from None
        except Exception as exc:  # noqa: BLE001 - any exception out of the app is the finding
            raise AssertionError(f"the app raised {type(exc).__name__}: {exc} on {what}\n"
                                 f"{''.join(traceback.format_exception(exc))}") from None
        self.counts[f"{method} {route_of(path)} -> {r.status_code}"] += 1
        self.counts["requests"] += 1
        return r

    def check(self, r: httpx.Response, what: str) -> None:
        """The properties every answer has: not a 500, nothing bad logged, /health still ok."""
        assert r.status_code < 500, f"{r.status_code} for {what}: {r.text[:2000]}"
        self.check_logs(what)
        health = self.loop.run_until_complete(self.client.get(self.health))
        assert health.status_code == 200 and health.json().get("status") == "ok", \
            f"/health answers {health.status_code} {health.text[:500]} after {what}"

    def check_logs(self, what: str) -> None:
        bad, self.records.bad = self.records.bad, []
        assert not bad, f"logged while answering {what}:\n" + "\n".join(
            f"{r.name} {r.levelname}: {r.getMessage()}\n" + ("".join(traceback.format_exception(*r.exc_info))
                                                              if r.exc_info else "") for r in bad)

    def summary(self) -> str:
        return "\n".join(f"{n:6d}  {k}" for k, n in sorted(self.counts.items()))


def describe(content: bytes | None, most: int = 300) -> str:
    if content is None:
        return "(no body)"
    return f"({len(content)} bytes) {content[:most]!r}" + ("..." if len(content) > most else "")


def route_of(path: str) -> str:
    """The route a path asks for, without the ids in it (for the counts)."""
    parts = path.split("?")[0].split("/")
    known = {"v1", "api", "health", "healthz", "chat", "completions", "models", "training_runs", "checkpoints",
             "sessions", "samplers", "finish"}
    return "/".join(p if not p or p in known or p.replace("_", "").isalpha() and len(p) < 40 else "{id}"
                    for p in parts)
