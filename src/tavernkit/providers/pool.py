"""The connection pool a Tavern's calls to hosted APIs share.

A provider given no client made one per request and closed it after the reply: every turn
opened a new connection, and against a hosted API that is a TCP and TLS handshake (tens to
hundreds of milliseconds) before the first token, and making the client itself cost about
0.2 ms. :class:`HttpPool` keeps one client for the Tavern, so a turn that follows another
within :data:`KEEPALIVE_S` reuses its connection, and retries, fallbacks and continuations
within a turn do too.

A client's connections belong to the event loop that opened them, and a Tavern can outlive a
loop (``asyncio.run`` twice over one Tavern): a connection of a closed loop would fail on its
next write. So the pool keeps one client per running loop, drops those of loops that closed,
and :meth:`HttpPool.aclose` (the Tavern's close) closes the current loop's.

A pool with an egress policy (:mod:`tavernkit.egress`: a server's non-admin user) makes its
clients on :class:`~tavernkit.egress.EgressTransport`, whose connections go only where the
policy allows (each is checked as it is opened).
Changing the policy retires the clients made under the old one.
"""

from __future__ import annotations

import asyncio
import ssl
from functools import cache

import httpx2

from tavernkit.egress import EgressPolicy, egress_client
from tavernkit.providers.http import Timeouts

__all__ = ["KEEPALIVE_S", "HttpPool", "default_ssl_context"]

#: how long an idle connection is kept for the next request (hosted APIs keep theirs open
#: about a minute; a closed one is seen before reuse, and the request opens a new one)
KEEPALIVE_S = 30.0


@cache
def default_ssl_context() -> ssl.SSLContext:
    """The certificate store a client without its own verifies against, loaded once: loading
    it costs tens of milliseconds, which a per-request client would pay on every turn."""
    return httpx2.create_ssl_context()


def new_client(egress: EgressPolicy | None = None) -> httpx2.AsyncClient:
    """A client as every provider call runs on: reads are timed per data event by the
    provider, so the client's read timeout is off; no limit on connections (a server streams
    hundreds of replies from one API at once). With ``egress``, its requests go only where
    that policy allows."""
    limits = httpx2.Limits(
        max_connections=None, max_keepalive_connections=100, keepalive_expiry=KEEPALIVE_S
    )
    if egress is not None:
        return egress_client(
            egress,
            verify=default_ssl_context(),
            limits=limits,
            timeout=Timeouts().httpx(),
        )
    return httpx2.AsyncClient(
        timeout=Timeouts().httpx(),
        transport=httpx2.AsyncHTTPTransport(verify=default_ssl_context(), limits=limits),
    )


_Held = tuple[asyncio.AbstractEventLoop, httpx2.AsyncClient]


class HttpPool:
    """One :func:`new_client` per running event loop (see the module docstring)."""

    def __init__(self, egress: EgressPolicy | None = None) -> None:
        self._clients: dict[int, _Held] = {}
        self._egress = egress
        #: clients made under an earlier policy: closed with the pool
        self._retired: list[_Held] = []

    @property
    def egress(self) -> EgressPolicy | None:
        """The policy the pool's requests go through (``None``: none)."""
        return self._egress

    def set_egress(self, egress: EgressPolicy | None) -> None:
        """Police the next clients with ``egress``; the current ones are retired (a request
        under way on one finishes; none is started there again)."""
        if egress == self._egress:
            return
        self._egress = egress
        self._retired += self._clients.values()
        self._clients = {}

    def client(self) -> httpx2.AsyncClient | None:
        """The running loop's client (made at its first call); ``None`` outside a loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        held = self._clients.get(id(loop))
        if held is not None and held[0] is loop:
            return held[1]
        for key, (other, _) in list(self._clients.items()):
            if other.is_closed():  # its connections died with it
                del self._clients[key]
        client = new_client(self._egress)
        self._clients[id(loop)] = (loop, client)
        return client

    async def aclose(self) -> None:
        """Close the running loop's client (and those retired); the next call makes a new
        one."""
        loop = asyncio.get_running_loop()
        held = self._clients.pop(id(loop), None)
        retired, self._retired = self._retired, []
        for owner, client in [*retired, *([held] if held is not None else [])]:
            if owner is loop:
                await client.aclose()
