"""``create_app``: the FastAPI application of ``tavernkit serve``.

The app is a face over :class:`~tavernkit.facade.Tavern`: its lifespan opens the data home's
store (or takes an open Tavern), ``app.state.server`` holds the
:class:`~tavernkit.server.state.ServerState` the routes share, every router of
:data:`~tavernkit.server.routes.ROUTERS` is included, and every error leaves as typed JSON
(:mod:`tavernkit.server.errors`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from tavernkit.facade import Tavern
from tavernkit.server.accounts import Accounts
from tavernkit.server.body_limit import BodyLimit
from tavernkit.server.coordination import ChatLock, RateLimiter, TurnEventLog
from tavernkit.server.coordination_local import InMemoryChatLock, InMemoryTurnEventLog
from tavernkit.server.coordination_memory import InMemoryRateLimiter
from tavernkit.server.errors import ERROR_RESPONSES, install_error_handlers
from tavernkit.server.routes import ROUTERS
from tavernkit.server.settings import ServerSettings
from tavernkit.server.shared_route import SharedRoutes
from tavernkit.server.state import ServerState
from tavernkit.server.turns import TurnHub

__all__ = ["create_app"]


def create_app(
    settings: ServerSettings,
    *,
    tavern: Tavern | None = None,
    limiter: RateLimiter | None = None,
    event_log: TurnEventLog | None = None,
    chat_lock: ChatLock | None = None,
) -> FastAPI:
    """The server app. ``tavern`` defaults to one over ``settings.home``; a Tavern the caller
    passed open stays open after the app stops, one the app opened is closed. ``limiter``
    defaults to the in-memory one (a multi-process server passes a shared one), as do
    ``event_log`` and ``chat_lock`` (the turns' events and the one-turn-per-chat lock). At
    shutdown running turns get a few seconds to finish, then are stopped keeping what they
    showed. Raises
    :class:`~tavernkit.errors.ServerConfigError` for unsafe settings."""
    settings.check()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tk = tavern if tavern is not None else Tavern(settings.home)
        opened_here = not tk.runtime.is_open
        await tk.open()
        hub = TurnHub(
            event_log if event_log is not None else InMemoryTurnEventLog(),
            chat_lock if chat_lock is not None else InMemoryChatLock(),
        )
        try:
            rate = limiter if limiter is not None else InMemoryRateLimiter()
            shared = SharedRoutes(settings, tk, tk.store, rate) if settings.accounts else None
            app.state.server = ServerState(
                settings=settings,
                tavern=tk,
                accounts=Accounts(tk.store, settings, rate),
                limiter=rate,
                turns=hub,
                shared=shared,
            )
            yield
        finally:
            await hub.close()
            app.state.server = None
            if opened_here:
                await tk.close()

    app = FastAPI(
        title="tavernkit",
        summary="SillyTavern-compatible character chat over HTTP",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.upload_max_bytes)
    for router in ROUTERS:
        app.include_router(router, responses=ERROR_RESPONSES)
    return app
