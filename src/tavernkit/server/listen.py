"""How ``tavernkit serve`` (and the tests' servers) listen: the socket they hand to uvicorn,
and uvicorn's configuration (:func:`uvicorn_config`: the connection limits of
:mod:`.connection_guard` over the HTTP protocol uvicorn picks itself: httptools when installed,
else h11).

The socket is made here rather than by uvicorn so the command knows its port before it starts
(``--port 0`` prints the port it got) and a taken address fails as one clear line. It is
created with ``proto=IPPROTO_TCP``: asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only
for sockets whose protocol says TCP, and a socket made with the default ``proto=0`` keeps it
on, so every small keep-alive response waited ~40 ms for the client's delayed ACK (measured: 46
ms per request before, 3 ms after)."""

from __future__ import annotations

import asyncio
import math
import socket
from typing import Any

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from tavernkit.errors import ServerConfigError
from tavernkit.server.connection_guard import ASGIApp, ConnectionGuard
from tavernkit.server.settings import ServerSettings

__all__ = ["listening_socket", "uvicorn_config"]


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` and listening; raises
    :class:`~tavernkit.errors.ServerConfigError` when the address cannot be used."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((bare, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ServerConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def uvicorn_config(
    app: ASGIApp,
    settings: ServerSettings,
    *,
    http: str = "auto",
    **options: Any,
) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` as ``tavernkit serve`` runs it: ``http`` (uvicorn's
    own choice of protocol, ``auto``, ``httptools`` or ``h11``, resolved as uvicorn resolves it)
    under ``settings.connections``' limits
    (:class:`~tavernkit.server.connection_guard.ConnectionGuard`); ``options`` are
    ``uvicorn.Config``'s own (``log_level``, ``lifespan``...)."""
    limits = settings.connections
    guard = ConnectionGuard(limits, body_cap=settings.upload_max_bytes)
    protocol: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS[http])
    config = uvicorn.Config(
        guard.app(app),
        http=guard.protocol(protocol),
        # the guard closes idle connections itself; uvicorn's own timer never comes first
        timeout_keep_alive=max(1, math.ceil(limits.keep_alive_s)),
        h11_max_incomplete_event_size=limits.max_head_bytes,
        **options,
    )
    guard.trust(config.forwarded_allow_ips)
    return config
