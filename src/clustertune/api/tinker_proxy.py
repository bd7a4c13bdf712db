"""The local end of a Tinker server on another machine: one stable address here, the tokenizer here.

The tinker SDK loads a base model's tokenizer itself, on the client, from the id ``get_info``
reports: on the server that is a directory of the server's machine. The proxy listens on
``127.0.0.1:PORT``, passes every request through to the server (over the ``ssh -L`` forward)
and, in each ``get_info`` answer, copies that tokenizer directory from the host into this
machine's cache (``CACHE/tinker-tokenizers/``, once per host and path) and reports the copy's
path instead, so ``get_tokenizer()`` works on a machine that never had the model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustertune.fsutil import replace_dir, temp_sibling
from clustertune.serve.listen import bind

log = logging.getLogger("clustertune.tinker")

# Headers that belong to one hop, not to the request or answer passed on.
_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer",
        "proxy-authorization", "proxy-authenticate"}


def tokenizer_copy_dir(cache: Path, host: str, remote_path: str) -> Path:
    key = hashlib.sha256(f"{host}\0{remote_path}".encode()).hexdigest()[:16]
    return cache / "tinker-tokenizers" / f"{Path(remote_path).name}-{key}"


class TinkerProxy:
    """``127.0.0.1:local_port`` -> ``upstream`` (the forwarded server), ``get_info`` rewritten."""

    def __init__(self, upstream: str | Callable[[], str | None], fetch: Callable[[str], Path], local_port: int = 0):
        """``upstream``: the server's URL, or a function that finds it now (a job that was
        requeued comes back on another node and port: the proxy asks again when it fails)."""
        import uvicorn

        self._find = upstream if callable(upstream) else (lambda: upstream)
        self.upstream = (self._find() or "").rstrip("/")
        self.fetch = fetch
        self._copies: dict[str, Path] = {}
        self._lock = threading.Lock()
        self.sock = bind("127.0.0.1", local_port)  # a port that cannot be taken: ServeError, exit 2
        self.local_port = int(self.sock.getsockname()[1])
        config = uvicorn.Config(self._app(), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]},
                                        name="tinker-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def start(self) -> TinkerProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self.sock.close()

    def local_tokenizer(self, remote_path: str) -> Path:
        with self._lock:
            if remote_path not in self._copies:
                self._copies[remote_path] = self.fetch(remote_path)
            return self._copies[remote_path]

    def _app(self) -> Any:
        import anyio
        import httpx
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        client = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0))

        async def send(request: Request) -> Any:
            url = f"{self.upstream}{request.url.path}" + (f"?{request.url.query}" if request.url.query else "")
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            return await client.request(request.method, url, headers=headers, content=await request.body())

        async def passthrough(request: Request) -> Response:
            try:
                up = await send(request)
            except httpx.TransportError as exc:
                # The server is away: restarting, or back elsewhere (a requeued job). Look again
                # for where it is; if nowhere new, a 503 (the SDK retries it; after a pause, as
                # it polls again at once after a 5xx).
                found = (await anyio.to_thread.run_sync(self._find) or "").rstrip("/")
                if found and found != self.upstream:
                    log.info("the Tinker server moved to %s", found)
                    self.upstream = found
                    try:
                        up = await send(request)
                    except httpx.TransportError:
                        up = None
                else:
                    up = None
                if up is None:
                    await anyio.sleep(1.0)
                    return JSONResponse({"error": f"the Tinker server is not reachable: {exc}", "category": "server"},
                                        status_code=503, headers={"Retry-After": "2"})
            body = up.content
            if request.url.path.endswith("/api/v1/get_info") and up.status_code == 200:
                info = json.loads(body)
                remote = (info.get("model_data") or {}).get("tokenizer_id")
                if remote:
                    local = await anyio.to_thread.run_sync(self.local_tokenizer, remote)
                    info["model_data"]["tokenizer_id"] = str(local)
                    body = json.dumps(info).encode()
            out = {k: v for k, v in up.headers.items() if k.lower() not in _HOP | {"content-encoding"}}
            return Response(content=body, status_code=up.status_code, headers=out)

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
        return Starlette(routes=[Route("/{path:path}", passthrough, methods=methods)])


def rsync_fetcher(conn: Any, cache: Path) -> Callable[[str], Path]:
    """Copies a directory of ``conn``'s host into ``cache`` (its tokenizer files only)."""
    def fetch(remote_path: str) -> Path:
        dest = tokenizer_copy_dir(cache, conn.host.address, remote_path)
        if (dest / "tokenizer_config.json").is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(dest)
        tmp.mkdir(exist_ok=True)
        # The tokenizer's files, not the model's weights beside them.
        conn.rsync(["-a", "--include=*token*", "--include=*.model", "--include=*.jinja", "--include=vocab*",
                    "--include=merges.txt", "--include=special_tokens_map.json", "--include=added_tokens.json",
                    "--include=config.json", "--exclude=*", conn.remote(remote_path.rstrip("/") + "/"), f"{tmp}/"],
                   timeout=300)
        replace_dir(tmp, dest)
        log.info("copied the tokenizer %s from %s to %s", remote_path, conn.host.label, dest)
        return dest

    return fetch
