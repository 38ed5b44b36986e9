"""The server's routers, included by :func:`~tavernkit.server.app.create_app` in this order.
A new group of routes is a module here with a ``router`` and one line in :data:`ROUTERS`.

A request is matched against the routes in order, a regex each (about a microsecond per
route): the routes every turn takes (the turns', the OpenAI facade's) come first, so they are
found before the other 250. No two routes match the same path and method, so the order
changes no answer (``tests/server/test_route_order.py``); the web UI's come last."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.routing import Route

from tavernkit.server.routes import (
    auth,
    characters,
    chats,
    documents,
    groups,
    health,
    mcp,
    memory,
    openai,
    profiles,
    settings,
    tasks,
    transfer,
    turns,
    ui,
    variables,
)

__all__ = ["PLAIN_ROUTES", "ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    turns.router,
    openai.router,
    health.router,
    auth.router,
    characters.router,
    chats.router,
    documents.router,
    profiles.router,
    profiles.shared_router,
    variables.router,
    transfer.router,
    groups.router,
    memory.router,
    settings.router,
    mcp.router,
    tasks.router,
    ui.router,
)

#: Routes served by a plain Starlette route placed ahead of every router: the OpenAI facade's
#: completions, which every piece of a bot's reply goes through. Its endpoint takes the
#: ``Request`` alone and validates its own body, so FastAPI's per-request work around it
#: (included-router matching, the dependency solver, its telemetry context) does nothing for
#: it, and cost 0.2 ms of the first token cold (the server's benchmark). The router's own
#: route stays, for the OpenAPI document; it is never reached for these methods.
PLAIN_ROUTES: tuple[Route, ...] = (
    Route(
        "/v1/chat/completions", openai.chat_completions, methods=["POST"], include_in_schema=False
    ),
)
