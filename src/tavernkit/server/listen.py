"""The listening socket ``tavernkit serve`` (and the tests' servers) hand to uvicorn.

Made here rather than by uvicorn so the command knows its port before it starts (``--port 0``
prints the port it got) and a taken address fails as one clear line. It is created with
``proto=IPPROTO_TCP``: asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only for sockets
whose protocol says TCP, and a socket made with the default ``proto=0`` keeps it on, so every
small keep-alive response waited ~40 ms for the client's delayed ACK (measured: 46 ms per
request before, 3 ms after)."""

from __future__ import annotations

import socket

from tavernkit.errors import ServerConfigError

__all__ = ["listening_socket"]


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
