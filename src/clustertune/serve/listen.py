"""The listening socket every server of clustertune's takes (the model server, the Tinker API, the
local end of a remote Tinker server): stdlib only, so the CLI side can bind without the model
stack."""

from __future__ import annotations

import socket

from clustertune.errors import UserError


class ServeError(UserError):
    """A serving option that cannot work (exit 2)."""


class ModelLoadError(ServeError):
    """The model failed to load after the server started listening: it stops (exit 1)."""

    exit_code = 1


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (port 0: any free one), or a clear error when it is taken."""
    if not 0 <= port <= 65535:
        raise ServeError(f"--port {port}: use 0 (any free port) or 1-65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a small response held back by Nagle's algorithm
    # meets the client's delayed ACK and each request/response pair waits ~40 ms (measured: a
    # Tinker optim_step round trip took 48 ms, 3 ms with it).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); "
                         "pick another port (--port 0 takes any free one)") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock
