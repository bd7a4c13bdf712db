"""The HTTP side: OpenAI's routes over one :class:`~clustertune.serve.engine.Engine`.

``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions``,
each streaming as server-sent events when asked (``data: {...}`` lines, ``data: [DONE]`` last).
With an API key set, every route but ``/health`` wants it as ``Authorization: Bearer KEY`` or
``X-API-Key: KEY``. Prompts and answers are never logged unless the server was started with
``log_prompts``. A body larger than the engine's ``max_body`` is refused with 413 before it is
read whole; prompts are tokenized off the event loop, so ``/health`` answers meanwhile.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from clustertune.serve.engine import Engine
from clustertune.serve.protocol import (ApiError, Ask, Choice, chat_logprobs, completion_logprobs, read_chat,
                                        read_completion, usage)
from clustertune.serve.responses import JSONAnswer

log = logging.getLogger("clustertune.serve")


def make_app(engine: Engine | None, *, api_key: str | None = None, log_prompts: bool = False,
             tinker: Any = None) -> Any:
    """The app; ``engine`` None serves the Tinker API alone, ``tinker`` (a
    :class:`~clustertune.serve.tinker.service.TinkerService`) adds it under ``/api/v1``."""
    app = FastAPI(title="clustertune", docs_url=None, redoc_url=None, openapi_url=None,
                  default_response_class=JSONAnswer)
    started = int(time.time())
    if tinker is not None:
        # Deferred: the Tinker routes need the tinker SDK's protobuf schema (the tinker extra).
        from clustertune.serve.tinker.routes import _Refused, make_router, refused

        app.include_router(make_router(tinker, api_key))
        app.add_exception_handler(_Refused, refused)
    if engine is None:
        @app.get("/health")
        async def tinker_health() -> JSONAnswer:
            return JSONAnswer({"status": "ok", "tinker": True, "queued": tinker.work.queued()})

        @app.api_route("/v1/{rest:path}", methods=["GET", "POST"])
        async def no_model(rest: str) -> JSONAnswer:
            return JSONAnswer(ApiError(404, "this server was started without a model (the Tinker API alone, "
                                              "under /api/v1): start `clustertune serve MODEL --tinker` to serve "
                                              "both", code="model_not_found").body(), status_code=404)

        return app

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONAnswer:
        return JSONAnswer(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONAnswer:
        log.exception("request failed")
        return JSONAnswer(ApiError(500, f"{type(exc).__name__}: {exc}", kind="server_error").body(), status_code=500)

    def check_key(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("x-api-key") or ""
        auth = request.headers.get("authorization") or ""
        if auth.lower().startswith("bearer "):
            given = given or auth[7:].strip()
        if not given or not hmac.compare_digest(given.encode(), api_key.encode()):
            raise ApiError(401, "a valid API key is needed: send it as `Authorization: Bearer KEY` or `X-API-Key: KEY`",
                           kind="authentication_error", code="invalid_api_key")

    def too_large(size: str, limit: int) -> ApiError:
        return ApiError(413, f"the request body is {size} bytes; this server takes at most {limit} (--max-body)",
                        code="request_too_large")

    async def body_of(request: Request) -> Any:
        limit = engine.max_body
        declared = request.headers.get("content-length") or ""
        if declared.isascii() and declared.isdigit() and int(declared) > limit:  # "²" is a digit to isdigit
            raise too_large(declared, limit)
        chunks, size = [], 0
        async for chunk in request.stream():  # counted as it arrives: a body without a length too
            size += len(chunk)
            if size > limit:
                raise too_large(f"over {limit}", limit)
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            # A large body is parsed off the event loop, as prompts are tokenized.
            body = json.loads(raw or b"null") if size < _PARSE_ON_LOOP else await asyncio.to_thread(json.loads, raw)
        except ValueError as exc:
            raise ApiError(400, f"the request body is not JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, "the request body is JSON nested too deeply to read") from None
        return body

    def check_model(ask: Ask) -> None:
        engine.pick(ask.model)  # 404 unless the base or one of its adapters

    def model_entry(model_id: str) -> dict[str, Any]:
        entry = {"id": model_id, "object": "model", "created": started, "owned_by": "clustertune"}
        if model_id != engine.model_id:
            entry["parent"] = engine.model_id  # an adapter, answered by the base with its weights
        return entry

    @app.get("/health")
    async def health() -> JSONAnswer:
        if engine.failed or engine.stopped:
            return JSONAnswer({"status": "failed", "error": engine.failed or engine.stopped}, status_code=500)
        if not engine.ready:
            return JSONAnswer({"status": "loading"}, status_code=503, headers={"Retry-After": "2"})
        return JSONAnswer({"status": "ok", "model": engine.model_id, "requests": engine.busy})

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"object": "list", "data": [model_entry(m) for m in engine.served_ids()]}

    @app.get("/v1/models/{model_id:path}")
    async def one_model(model_id: str, request: Request) -> dict[str, Any]:
        check_key(request)
        if model_id != engine.model_id and engine.adapters is None:
            raise ApiError(404, f"model {model_id!r} is not served here", param="model", code="model_not_found")
        engine.pick(model_id)
        return model_entry(model_id)

    async def serve(request: Request, ask: Ask) -> Any:
        check_model(ask)
        ids, chat = await engine.encode_off_loop(ask)
        engine.room(len(ids), ask.sampled)  # 413 before a place is taken
        if log_prompts:
            log.info("%s: %s", ask.id, json.dumps(ask.messages if chat else ask.prompt))
        shape = _ChatShape(ask, ask.model) if chat else _CompletionShape(ask, ask.model)
        if not ask.stream:
            async with engine.admitted():
                choices: dict[int, Choice] = {}
                async for _, _, done in engine.answer(ask, ids, chat):
                    if done is not None:
                        choices[done.index] = done
            if log_prompts:
                log.info("%s answered: %s", ask.id, json.dumps([c.text for c in choices.values()]))
            return shape.whole([choices[i] for i in sorted(choices)], len(ids))

        # Admission happens before the response starts, so a full line is a plain 429; the place
        # is given back when the stream ends, or after the response if it never started.
        ticket = engine.ticket()

        async def events() -> AsyncIterator[str]:
            try:
                await ticket.wait()
                for i in range(ask.sampled.n):
                    yield _sse(shape.opening(i))
                done_tokens = 0
                async for i, delta, done in engine.answer(ask, ids, chat):
                    if delta or (done is not None and done.logprobs):
                        yield _sse(shape.piece(i, delta, done))
                    if done is not None:
                        done_tokens += done.tokens
                        yield _sse(shape.closing(done))
                if ask.include_usage:
                    yield _sse(shape.usage_only(len(ids), done_tokens))
                yield "data: [DONE]\n\n"
            except ApiError as exc:  # after the stream began: the error travels as an event
                yield _sse(exc.body())
            finally:
                ticket.release()

        return StreamingResponse(events(), media_type="text/event-stream", background=BackgroundTask(ticket.release),
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        check_key(request)
        engine.require_ready()
        return await serve(request, read_chat(await body_of(request)))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        check_key(request)
        engine.require_ready()
        return await serve(request, read_completion(await body_of(request)))

    return app


_PARSE_ON_LOOP = 64 << 10  # bytes


def _sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class _ChatShape:
    def __init__(self, ask: Ask, model: str):
        self.ask, self.model = ask, model
        self.head = {"id": f"chatcmpl-{ask.id}", "created": ask.created, "model": model, "system_fingerprint": None}

    def whole(self, choices: list[Choice], prompt_tokens: int) -> dict[str, Any]:
        return {**self.head, "object": "chat.completion",
                "choices": [{"index": c.index, "message": {"role": "assistant", "content": c.text, "refusal": None},
                             "logprobs": chat_logprobs(c.logprobs) if self.ask.sampled.logprobs else None,
                             "finish_reason": c.finish_reason} for c in choices],
                "usage": usage(prompt_tokens, sum(c.tokens for c in choices))}

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {**self.head, "object": "chat.completion.chunk", "choices": choices}

    def opening(self, i: int) -> dict[str, Any]:
        return self._chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}])

    def piece(self, i: int, delta: str, done: Choice | None) -> dict[str, Any]:
        lp = chat_logprobs(done.logprobs) if done is not None and self.ask.sampled.logprobs else None
        return self._chunk([{"index": i, "delta": {"content": delta}, "logprobs": lp, "finish_reason": None}])

    def closing(self, c: Choice) -> dict[str, Any]:
        return self._chunk([{"index": c.index, "delta": {}, "logprobs": None, "finish_reason": c.finish_reason}])

    def usage_only(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        return {**self._chunk([]), "usage": usage(prompt_tokens, completion_tokens)}


class _CompletionShape:
    def __init__(self, ask: Ask, model: str):
        self.ask, self.model = ask, model
        self.head = {"id": f"cmpl-{ask.id}", "object": "text_completion", "created": ask.created, "model": model,
                     "system_fingerprint": None}

    def whole(self, choices: list[Choice], prompt_tokens: int) -> dict[str, Any]:
        return {**self.head,
                "choices": [{"index": c.index, "text": c.text, "finish_reason": c.finish_reason,
                             "logprobs": completion_logprobs(c.logprobs) if self.ask.sampled.logprobs else None}
                            for c in choices],
                "usage": usage(prompt_tokens, sum(c.tokens for c in choices))}

    def opening(self, i: int) -> dict[str, Any]:
        return {**self.head, "choices": [{"index": i, "text": "", "logprobs": None, "finish_reason": None}]}

    def piece(self, i: int, delta: str, done: Choice | None) -> dict[str, Any]:
        lp = completion_logprobs(done.logprobs) if done is not None and self.ask.sampled.logprobs else None
        return {**self.head, "choices": [{"index": i, "text": delta, "logprobs": lp, "finish_reason": None}]}

    def closing(self, c: Choice) -> dict[str, Any]:
        return {**self.head, "choices": [{"index": c.index, "text": "", "logprobs": None,
                                          "finish_reason": c.finish_reason}]}

    def usage_only(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        return {**self.head, "choices": [], "usage": usage(prompt_tokens, completion_tokens)}
