"""How ``tavernkit serve`` stops (SIGTERM, Ctrl-C): :class:`GracefulServer`.

uvicorn alone waits for every open response before it stops, and a turn's event stream stays
open until its turn ends: a stalled upstream held a process for a minute, past the 30 s an
orchestrator grants before SIGKILL. Here the listening sockets close first (a load balancer's
next connection goes to another process), then :meth:`~tavernkit.server.turns.TurnHub.drain`
gives the running turns ``grace_s`` to finish, stops the rest (what they showed is stored,
their streams end with ``done``) and ends this process's readers of other processes' turns
with an ``error`` event; only then does uvicorn close what is left (after at most
``LINGER_S``) and run the app's shutdown.
"""

from __future__ import annotations

import socket

import uvicorn
from starlette.applications import Starlette

from tavernkit.server.state import ServerState

__all__ = ["LINGER_S", "GracefulServer"]

#: how long uvicorn then waits for responses still open before it cancels them
LINGER_S = 3.0


class GracefulServer(uvicorn.Server):
    """``uvicorn.Server`` that drains ``app``'s turns before it closes connections (see the
    module docstring). ``config`` should carry ``timeout_graceful_shutdown=LINGER_S``."""

    def __init__(self, config: uvicorn.Config, *, app: Starlette, grace_s: float) -> None:
        super().__init__(config)
        self.tavern_app = app
        self.grace_s = grace_s

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connection from now on
        state = getattr(self.tavern_app.state, "server", None)
        if isinstance(state, ServerState):
            await state.turns.drain(grace_s=self.grace_s)
        await super().shutdown(sockets=sockets)
