"""Both HTTP APIs fuzzed from their request schemas, in-process on the tiny chat model.

OpenAI's routes get bodies shaped like the protocol's (every field the server reads, now and then
one of them hostile: a wrong type, a huge, negative, NaN or infinite number, a lone surrogate,
an unknown field, a missing one) and bodies that are not: arbitrary JSON, bytes that are not
UTF-8, deep nesting, truncations. The Tinker routes get requests built with the SDK's own types
(``Datum``, ``ModelInput``, ``TensorData``, ``SamplingParams``, ``AdamParams``...), protobuf
bodies the SDK would never write, and the same hostile JSON.

Every answer: not a 500 and no exception out of the app, nothing logged as an error or with a
traceback, ``/health`` answering after it; a Tinker result is never a ``server`` error. A refused
request (a 4xx, or a result carrying a ``user`` error) leaves the training client exactly as it
was (adapter weights, gradients, Adam state, step count), adds no sampler or client, writes no
file, and nothing is ever written outside the server's state directory. After the run the client
still trains and samples.

``CLUSTERTUNE_FUZZ_EXAMPLES=5000`` raises the number of requests per API from the CI size.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from clustertune.serve.app import make_app
from clustertune.serve.engine import Engine, Limits
from clustertune.serve.tinker import work
from clustertune.serve.tinker.service import TinkerService
from clustertune.use.generate import Generator
from clustertune.use.load import load_for_use
from tests.unit.serve import tinker_fuzz
from tests.unit.serve.fuzzing import (NUMBER_EDGES, Harness, any_value, dumps, fuzz_settings, hostile, raw_body,
                                      route_of, texts)

MODEL = "chat"


@pytest.fixture(scope="module")
def served(chat_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, TinkerService, Path]]:
    root = tmp_path_factory.mktemp("fuzz")
    engine = Engine(lambda: Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32")), MODEL,
                    Limits(running=2, waiting=2, max_tokens=4))
    engine.load()
    assert engine.ready, engine.failed
    service = TinkerService(root / "state", runs_root=str(root / "runs"), device="cpu", dtype="fp32")
    # A request whose seq_id skips ahead waits for the ones before it; not for long here.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(work, "GAP_WAIT_S", 0.05)
        yield engine, service, root
    service.close()
    engine.close()


@pytest.fixture(scope="module")
def harness(served: tuple[Engine, TinkerService, Path]) -> Iterator[Harness]:
    engine, service, _ = served
    h = Harness(make_app(engine, tinker=service))
    yield h
    h.close()
    print(f"\nrequests sent and their answers:\n{h.summary()}")


# -- OpenAI's routes ------------------------------------------------------------------------------

def edges(values: st.SearchStrategy[Any], ends: list[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(values, st.sampled_from(ends))


content_parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), min_size=1, max_size=2)
message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "developer"]),
                                 "content": st.one_of(texts, content_parts)})
stops = st.one_of(st.text(min_size=1, max_size=3), st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=4))
# Good values include the edges of each range: a temperature of 5e-324 is as valid as 0.7.
SAMPLING = {
    "max_tokens": edges(st.integers(1, 4), [10**9]), "top_p": edges(st.floats(0, 1), [0, 1, 5e-324, 1e-300]),
    "temperature": edges(st.floats(0, 2), [0, 2, 5e-324, 1e-300, 1e-30, 1e-5]), "n": st.integers(1, 2),
    "seed": edges(st.integers(0, 2**32 - 1), [0, 2**32 - 1]), "stop": stops, "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}), "user": texts,
    "presence_penalty": st.just(0), "frequency_penalty": st.just(0.0), "logit_bias": st.just({}),
}
CHAT = {**SAMPLING, "max_completion_tokens": st.integers(1, 4), "logprobs": st.booleans(),
        "top_logprobs": st.integers(0, 3), "response_format": st.just({"type": "text"}), "tools": st.just([]),
        "tool_choice": st.just("none"), "metadata": st.dictionaries(texts, texts, max_size=2),
        "store": st.booleans(), "modalities": st.just(["text"]), "parallel_tool_calls": st.booleans()}
COMPLETION = {**SAMPLING, "logprobs": st.integers(0, 3), "echo": st.just(False), "best_of": st.just(1),
              "suffix": st.just("")}


NUMERIC = {"max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "seed", "top_logprobs", "logprobs",
           "presence_penalty", "frequency_penalty", "best_of"}


@st.composite
def shaped(draw: st.DrawFn, required: dict[str, st.SearchStrategy[Any]],
           optional: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """A body with the route's fields: all good but one that is wrong (or missing), or a mix of
    good, wrong and missing ones, sometimes with a field the protocol does not have. (With several
    wrong fields the first one checked hides the others: the one-wrong bodies reach them all.)"""
    body = {key: draw(good) for key, good in required.items()}
    for key in draw(st.lists(st.sampled_from(sorted(optional)), max_size=8, unique=True)):
        body[key] = draw(optional[key])
    if draw(st.booleans()):
        keys = {*required, *optional}
        key = draw(st.sampled_from(sorted(keys & NUMERIC) if draw(st.booleans()) else sorted(keys)))
        if draw(st.integers(0, 9)) == 0:
            body.pop(key, None)
        else:
            body[key] = draw(NUMBER_EDGES if key in NUMERIC else any_value)
        return body
    for key in sorted(body):
        roll = draw(st.integers(0, 11))
        if roll == 0:
            body.pop(key)
        elif roll == 1:
            body[key] = draw(NUMBER_EDGES if key in NUMERIC else any_value)
    if draw(st.integers(0, 9)) == 0:
        body[draw(texts)] = draw(hostile)
    return body


chat_body = shaped({"model": st.just(MODEL), "messages": st.lists(message, min_size=1, max_size=3)}, CHAT)
completion_body = shaped({"model": st.just(MODEL), "prompt": st.one_of(texts, st.lists(texts, min_size=1, max_size=1))},
                         COMPLETION)
ODD_TYPES = ["application/json", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1",
             "multipart/form-data; boundary=x", ""]


@st.composite
def openai_request(draw: st.DrawFn) -> tuple[str, str, bytes | None, dict[str, str]]:
    route = draw(st.sampled_from(["chat"] * 5 + ["completions"] * 4 + ["models", "model", "health", "other"]))
    headers = {"Content-Type": draw(st.sampled_from(ODD_TYPES))} if draw(st.integers(0, 7)) == 0 else {}
    if route in ("chat", "completions"):
        path = "/v1/chat/completions" if route == "chat" else "/v1/completions"
        kind = draw(st.sampled_from(["shaped"] * 6 + ["raw", "value"]))
        if kind == "shaped":
            content = dumps(draw(chat_body if route == "chat" else completion_body))
        elif kind == "raw":
            prefix = b'{"model": "chat", "messages": ' if route == "chat" else b'{"model": "chat", "prompt": '
            content = draw(raw_body(prefix))
        else:
            content = dumps(draw(any_value))
        if draw(st.integers(0, 19)) == 0:
            headers["Content-Length"] = draw(st.sampled_from(["0", "-1", "abc", "\xb2", "99999999999", "1e3", " 5"]))
        return draw(st.sampled_from(["POST"] * 9 + ["GET", "PUT"])), path, content, headers
    if route == "models":
        return "GET", "/v1/models", None, headers
    if route == "model":
        name = draw(st.one_of(st.just(MODEL), texts))
        return "GET", f"/v1/models/{quote(name.encode('utf-8', 'replace'), safe='/:')}", None, headers
    if route == "health":
        return draw(st.sampled_from(["GET", "POST"])), "/health", None, headers
    return draw(st.sampled_from(["GET", "POST", "DELETE"])), draw(st.sampled_from(
        ["/v1", "/v1/", "/v1/embeddings", "/v1/chat", "/v1/chat/completions/x", "/", "/v2/models"])), None, headers


def check_openai_answer(r: Any, method: str, path: str) -> None:
    """A refusal in OpenAI's error shape; an answer with its choices; a stream of JSON events."""
    if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
        return
    if r.status_code >= 400:
        err = r.json().get("error")
        assert isinstance(err, dict) and err.get("message") and err.get("type"), r.text[:500]
        return
    assert r.status_code == 200, r.text[:500]
    if r.headers["content-type"].startswith("text/event-stream"):
        events = [line[6:] for line in r.text.split("\n") if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]", r.text[:1000]
        for e in events[:-1]:
            assert "error" not in json.loads(e), f"an error after the stream began: {e}"
    else:
        assert r.json()["choices"], r.text[:500]


@fuzz_settings()
@given(req=openai_request())
def test_openai_routes_never_fail_on_any_body(harness: Harness, served: tuple[Engine, TinkerService, Path],
                                              req: tuple[str, str, bytes | None, dict[str, str]]) -> None:
    engine = served[0]
    method, path, content, headers = req
    harness.begin()
    r = harness.send(method, path, content, headers)
    event(f"{method} {route_of(path)} -> {r.status_code}")
    what = f"{method} {path} {content[:500] if content else b''!r} {headers}"
    harness.check(r, what)
    check_openai_answer(r, method, path)
    # Nothing stays behind: every place taken by the request was given back.
    assert engine.busy == 0, f"{engine.busy} places still taken after {what}"


# -- the Tinker API -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tinker_world(harness: Harness, served: tuple[Engine, TinkerService, Path], chat_base: Path) -> tinker_fuzz.World:
    _, service, root = served
    return tinker_fuzz.World.create(harness, service, chat_base, root)


@fuzz_settings()
@given(data=st.data())
def test_tinker_routes_never_fail_and_refusals_change_nothing(harness: Harness, tinker_world: tinker_fuzz.World,
                                                              data: st.DataObject) -> None:
    req = data.draw(tinker_fuzz.request(tinker_world))
    event(f"{req.method} {req.route}")
    tinker_world.exchange(req)


def test_after_the_tinker_fuzz_the_client_still_trains_and_samples(tinker_world: tinker_fuzz.World) -> None:
    tinker_world.still_works()
