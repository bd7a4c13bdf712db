"""The Tinker protocol's HTTP routes under ``/api/v1``, as the pinned SDK calls them.

Direct calls answer JSON. Calls that do work answer ``{"request_id"}`` at once; the client
polls ``retrieve_future``, which holds the request up to :data:`LONG_POLL_S` and then answers
``try_again`` (the SDK polls again at once, so a short hold would make it spin). A failure is an
HTTP 200 carrying ``{"error", "category"}`` (the SDK raises ``RequestFailedError`` with it); a
route this server does not have answers 400 with a message naming it, never a hang.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from clustertune.errors import UserError
from clustertune.serve.responses import JSONAnswer
from clustertune.serve.tinker.lora import TinkerUserError
from clustertune.serve.tinker.service import TinkerService, now
from clustertune.serve.tinker.wire import PROTOBUF

LONG_POLL_S = 25.0


def make_router(service: TinkerService, api_key: str | None = None) -> APIRouter:
    r = APIRouter(prefix="/api/v1", default_response_class=JSONAnswer)

    async def body_of(request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as exc:
            raise _Refused(f"the request body is not JSON: {exc}") from None
        except RecursionError:
            raise _Refused("the request body is JSON nested too deeply to read") from None
        if not isinstance(body, dict):
            raise _Refused("the request body must be a JSON object")
        return body

    def check_key(request: Request) -> None:
        # The SDK sends its key as X-API-Key; with a key set here, it must be that one.
        if api_key is not None:
            given = request.headers.get("x-api-key") or ""
            if not hmac.compare_digest(given.encode(), api_key.encode()):
                raise _Refused("a valid API key is needed (TINKER_API_KEY on the client)", 401)

    def future(rid: str, **extra: Any) -> dict[str, Any]:
        return {"request_id": rid, **extra}

    # What may quote a client's own text is answered through JSONAnswer itself: FastAPI writes a
    # returned dict with pydantic's encoder, which cannot write a lone surrogate either.
    async def direct(request: Request, fn: Any) -> Any:
        check_key(request)
        body = await body_of(request)
        try:
            return JSONAnswer(fn(body))
        except (TinkerUserError, UserError) as exc:
            service.pass_over(body)  # a training client's numbered request, refused: not to be waited for
            raise _Refused(str(exc)) from None

    def by_id(request: Request, fn: Any, ident: str) -> Any:
        """``fn(ident)`` for a route that names a thing by its id: one that is not here is a 404."""
        check_key(request)
        try:
            return JSONAnswer(fn(ident))
        except TinkerUserError as exc:
            raise _Refused(str(exc), 404) from None

    @r.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @r.post("/client/config")
    async def client_config(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"pjwt_auth_enabled": False, "proto_compress_fwdbwd": False, "sample_use_retrieve_futures": False,
                "custom_loss_server_side": False, "sample_join_sampling_session": False}

    @r.post("/client/dynamic_config")
    async def dynamic_config(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"refresh_interval_sec": 300, "sample_cancel_enabled": False}

    @r.post("/create_session")
    async def create_session(request: Request) -> Any:
        return await direct(request, service.create_session)

    @r.post("/session_heartbeat")
    async def heartbeat(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"type": "session_heartbeat"}

    @r.post("/telemetry")
    async def telemetry(request: Request) -> dict[str, Any]:
        # Nothing is collected: the SDK's events are read and dropped.
        await request.body()
        return {"status": "accepted"}

    @r.post("/sessions/{session_id}/finish")
    async def finish(session_id: str, request: Request) -> dict[str, Any]:
        check_key(request)
        service.sessions.pop(session_id, None)
        return {}

    @r.get("/get_server_capabilities")
    async def capabilities(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"supported_models": [{"model_name": b.ref, "max_context_length": b.positions, "trainable": True,
                                      "sampleable": True} for b in service.bases.values()]}

    @r.post("/get_info")
    async def get_info(request: Request) -> Any:
        return await direct(request, service.get_info)

    @r.post("/forward_backward")
    async def forward_backward(request: Request) -> Any:
        check_key(request)
        if PROTOBUF not in (request.headers.get("content-type") or ""):
            raise _Refused(f"forward_backward takes a protobuf body ({PROTOBUF}), as the tinker SDK sends it")
        raw = await request.body()
        try:
            return future(service.forward_backward(raw, request.headers.get("content-encoding")))
        except TinkerUserError as exc:  # refused at the edge: nothing was queued
            raise _Refused(str(exc)) from None

    def queued(name: str, start: Callable[[dict[str, Any]], str]) -> None:
        """A route that queues its work and answers ``{"request_id"}`` at once."""
        async def route(request: Request) -> Any:
            return await direct(request, lambda b: future(start(b)))
        r.add_api_route(f"/{name}", route, methods=["POST"], name=name)

    for name, start in {"create_model": service.create_model, "optim_step": service.optim_step,
                        "save_weights": service.save_weights, "load_weights": service.load_weights,
                        "save_weights_for_sampler": service.save_weights_for_sampler}.items():
        queued(name, start)

    @r.post("/create_sampling_session")
    async def create_sampling_session(request: Request) -> Any:
        return await direct(request, service.create_sampling_session)

    @r.get("/samplers/{sampler_id:path}")
    async def get_sampler(sampler_id: str, request: Request) -> Any:
        return by_id(request, service.sampler, sampler_id)

    @r.post("/asample")
    async def asample(request: Request) -> Any:
        def go(body: dict[str, Any]) -> dict[str, Any]:
            rid, ids = service.sample(body)
            return future(rid, sample_sequence_ids=ids)
        return await direct(request, go)

    @r.post("/retrieve_future")
    async def retrieve_future(request: Request) -> Any:
        check_key(request)
        body = await body_of(request)
        rid = str(body.get("request_id") or "")
        fut = service.work.future(rid)
        if fut is None:
            # 410: a sampling client submits again; a training client raises RetryableException.
            return JSONAnswer({"error": f"request {rid!r} is not known to this server (it restarted, or the "
                                          "result expired)", "category": "server"}, status_code=410)
        try:
            kind, value = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), LONG_POLL_S)
        except asyncio.TimeoutError:
            return {"type": "try_again", "request_id": rid, "queue_state": "active"}
        if kind == "proto":
            return Response(content=value, media_type=PROTOBUF)
        return JSONAnswer(value)

    @r.get("/training_runs/{model_id}")
    async def training_run(model_id: str, request: Request) -> Any:
        return by_id(request, service.training_run, model_id)

    @r.get("/training_runs/{model_id}/checkpoints")
    async def checkpoints(model_id: str, request: Request) -> Any:
        check_key(request)
        found = service.store.checkpoints(model_id)
        return {"checkpoints": found, "cursor": {"offset": 0, "limit": len(found), "total_count": len(found)}}

    @r.delete("/training_runs/{model_id}/checkpoints/{checkpoint_id:path}")
    async def delete_checkpoint(model_id: str, checkpoint_id: str, request: Request) -> Any:
        by_id(request, service.delete_checkpoint, f"tinker://{model_id}/{checkpoint_id}")
        return {}

    @r.get("/training_runs")
    async def training_runs(request: Request) -> Any:
        check_key(request)
        runs = [service.training_run(m) for m in sorted(service.trainees)]
        return {"training_runs": runs, "cursor": {"offset": 0, "limit": len(runs), "total_count": len(runs)}}

    @r.post("/weights_info")
    async def weights_info(request: Request) -> Any:
        return await direct(request, lambda b: service.weights_info(str(b.get("tinker_path") or "")))

    @r.get("/sessions/{session_id}")
    async def get_session(session_id: str, request: Request) -> Any:
        check_key(request)
        s = service.sessions.get(session_id)
        if s is None:
            raise _Refused(f"session {session_id!r} is not known to this server", 404)
        return JSONAnswer({"training_run_ids": s["models"], "sampler_ids": s["samplers"],
                           "user_metadata": s["user_metadata"]})

    @r.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "DELETE"])
    async def unsupported(rest: str) -> Any:
        raise _Refused(f"/api/v1/{rest} is not supported by this server (clustertune serve); see the README's "
                       "Tinker section for the calls it answers")

    return r


class _Refused(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


async def refused(_: Request, exc: _Refused) -> JSONAnswer:
    # A 400 with a body: the SDK raises BadRequestError with the message (an empty 400 it would
    # take for a proxy's and retry).
    return JSONAnswer({"error": str(exc), "category": "user", "time": now()}, status_code=exc.status)


__all__ = ["make_router", "refused", "_Refused"]
