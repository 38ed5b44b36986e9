"""The server's routers, included by :func:`~tavernkit.server.app.create_app` in this order.
A new group of routes is a module here with a ``router`` and one line in :data:`ROUTERS`.

A request is matched against the routes in order, a regex each (about a microsecond per
route): the routes every turn takes (the turns', the OpenAI facade's) come first, so they are
found before the other 250. No two routes match the same path and method, so the order
changes no answer (``tests/server/test_route_order.py``); the web UI's come last."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from tavernkit.server.routes import (
    auth,
    backups,
    characters,
    chats,
    documents,
    groups,
    health,
    lorebooks,
    mcp,
    memory,
    openai,
    personas,
    profiles,
    quick_replies,
    regex,
    scripts,
    search,
    selections,
    settings,
    tasks,
    transfer,
    turns,
    ui,
    variables,
)

__all__ = ["AHEAD_OF_MIDDLEWARE", "ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    turns.router,
    openai.router,
    health.router,
    auth.router,
    characters.router,
    chats.router,
    scripts.router,
    quick_replies.router,
    search.router,
    documents.router,
    lorebooks.router,
    personas.router,
    profiles.router,
    profiles.shared_router,
    variables.router,
    transfer.router,
    groups.router,
    memory.router,
    settings.router,
    regex.router,
    selections.router,
    mcp.router,
    tasks.router,
    backups.router,
    ui.router,
)

#: Endpoints the app serves ahead of its middleware stack, by method and path: the OpenAI
#: facade's completions, which every piece of a bot's reply goes through. Each takes the
#: ``Request`` alone, validates its own body and answers every error itself, so the six
#: middlewares and the router around a route (FastAPI's telemetry and body limit, Starlette's
#: error and exception middlewares, the exit stack, route matching) do nothing for it: they
#: cost 0.2 ms of the first token cold (the server's benchmark), and matching it first in the
#: router still left them. Only :class:`~tavernkit.server.body_limit.BodyLimit` wraps it
#: (:class:`~tavernkit.server.app.TavernApp`). The routers' own routes stay, for the OpenAPI
#: document and the path's other methods (the app's typed 405).
AHEAD_OF_MIDDLEWARE: dict[tuple[str, str], Callable[[Request], Awaitable[Response]]] = {
    ("POST", "/v1/chat/completions"): openai.chat_completions,
}
