"""The OpenAI routes at the edge, in-process on the tiny chat model: a body over --max-body is a 413
in OpenAI's shape (with or without a length), user errors are 400s naming the field (never a 500),
/health answers while a prompt is being tokenized, and a server whose model cannot load stops with
the error and exit 1, never saying "serving"; options that can be checked up front exit 2."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from clustertune.cli.main import main
from clustertune.serve.app import make_app
from clustertune.serve.engine import Engine, Limits
from clustertune.serve.listen import ModelLoadError
from clustertune.serve.server import Server, prepare
from clustertune.use.generate import Generator
from clustertune.use.load import load_for_use


@pytest.fixture(scope="module")
def engine(chat_base: Path) -> Iterator[Engine]:
    e = Engine(lambda: Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32")), "chat",
               Limits(running=2, waiting=2, max_tokens=4, max_body=4096))
    e.load()
    assert e.ready, e.failed
    yield e
    e.close()


def run(engine: Engine, scenario: Any) -> Any:
    async def go() -> Any:
        transport = httpx.ASGITransport(app=make_app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return await scenario(client)
    return asyncio.run(go())


def hi(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0,
            **extra}


def test_a_body_over_max_body_is_413_in_openais_shape(engine: Engine) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"model": "chat", "messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}]}'

    async def scenario(client: httpx.AsyncClient) -> list[httpx.Response]:
        big = hi(messages=[{"role": "user", "content": "word " * 1000}])
        return [await client.post("/v1/chat/completions", json=big),
                await client.post("/v1/chat/completions", content=chunks()),  # no length: counted as it comes
                await client.post("/v1/chat/completions", json=hi())]

    declared, streamed, fine = run(engine, scenario)
    for r in (declared, streamed):
        assert r.status_code == 413, r.text
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["code"] == "request_too_large"
        assert "at most 4096 (--max-body)" in err["message"]
    assert fine.status_code == 200 and fine.json()["choices"][0]["finish_reason"] in ("stop", "length")
    # The default: generous for the model's context (64 bytes a token), never under 4 MiB.
    assert Engine(lambda: None, "x").max_body == 4 << 20


def test_a_prompt_past_the_context_is_413_with_its_whole_length(engine: Engine) -> None:
    """Counted as it is encoded (no list of its ids is built): the message gives the prompt's
    full length, for a completion and for a chat."""
    tok = engine.require_ready().tokenizer
    text = "word " * 600  # 2,999 bytes of body: under this engine's 4,096
    plain = len(tok(text)["input_ids"])
    chat = len(tok(engine.require_ready().prompt_text([{"role": "user", "content": text}]),
                   add_special_tokens=False)["input_ids"])

    async def scenario(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.post("/v1/completions", json={"model": "chat", "prompt": text, "max_tokens": 2}),
                await client.post("/v1/chat/completions", json=hi(messages=[{"role": "user", "content": text}]))]

    for r, n in zip(run(engine, scenario), (plain, chat)):
        assert r.status_code == 413, r.text
        err = r.json()["error"]
        assert err["code"] == "context_length_exceeded" and f"the prompt is {n} tokens and chat reads at most 128" in err["message"]


def test_user_errors_are_400s_naming_the_field_not_500s(engine: Engine) -> None:
    async def scenario(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.post("/v1/chat/completions", json=hi(seed=-1)),
                await client.post("/v1/chat/completions", json=hi(logit_bias={"5": 100})),
                await client.post("/v1/completions", json={"model": "chat", "prompt": "x", "logit_bias": {"5": 1}}),
                await client.post("/v1/chat/completions", json=hi(seed=3))]

    *bad, seeded = run(engine, scenario)
    assert [(r.status_code, r.json()["error"]["param"]) for r in bad] == [(400, "seed"), (400, "logit_bias"),
                                                                          (400, "logit_bias")]
    assert seeded.status_code == 200, seeded.text


def test_health_answers_while_a_prompt_is_tokenized(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = threading.Event(), threading.Event()
    waited: list[bool] = []
    real = engine.encode

    def slow(ask: Any) -> Any:  # a prompt that takes long to render and tokenize
        entered.set()
        waited.append(release.wait(10))
        return real(ask)

    monkeypatch.setattr(engine, "encode", slow)

    async def scenario(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        answer = asyncio.create_task(client.post("/v1/chat/completions", json=hi()))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        health = await client.get("/health")  # the loop is free while the prompt is being encoded
        release.set()
        return health, await answer

    health, answer = run(engine, scenario)
    assert waited == [True], "the prompt was encoded on the event loop: /health waited for it"
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def broken_model(chat_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with its weights file cut short: found, but it cannot load."""
    out = tmp_path_factory.mktemp("broken") / "broken-model"
    shutil.copytree(chat_base, out)
    weights = out / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    return out


def test_a_model_that_cannot_load_stops_the_server_with_the_error(broken_model: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    said: list[str] = []
    server = Server(prepare(str(broken_model), device="cpu", dtype="fp32"), port=0)
    with pytest.raises(ModelLoadError, match="broken-model failed to load, so the server stopped") as e:
        server.run(lambda s: said.append("listening"), lambda s: said.append("serving"))
    assert said == ["listening"] and e.value.exit_code == 1
    # The command: exit 1, the error on the terminal, and never "serving".
    assert main(["serve", str(broken_model), "--port", "0", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "failed to load" in err and "serving" not in err and "Traceback" not in err, err


def test_options_checked_up_front_exit_2_before_anything_listens(chat_base: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in [(["--dtype", "fp64"], "--dtype 'fp64'"), (["--template", "no-such"], "--template 'no-such'"),
                        (["--max-body", "0"], "--max-body 0"), (["--tinker", "--dtype", "f16"], "--dtype 'f16'")]:
        assert main(["serve", str(chat_base), "--port", "0", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert words in err and "listening" not in err and "Traceback" not in err, (argv, err)
