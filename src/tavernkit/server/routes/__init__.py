"""The server's routers, included by :func:`~tavernkit.server.app.create_app` in this order.
A new group of routes is a module here with a ``router`` and one line in :data:`ROUTERS`.

A request is matched against the routes in order, a regex each (about a microsecond per
route): the routes every turn takes (the turns', the OpenAI facade's) come first, so they are
found before the other 250. No two routes match the same path and method, so the order
changes no answer (``tests/server/test_route_order.py``); the web UI's come last."""

from __future__ import annotations

from fastapi import APIRouter

from tavernkit.server.routes import (
    auth,
    backups,
    characters,
    chat_tree,
    chats,
    documents,
    groups,
    health,
    lorebooks,
    mcp,
    memory,
    metrics,
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
    writers,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    turns.router,
    openai.router,
    health.router,
    metrics.router,
    auth.router,
    characters.router,
    writers.router,
    chats.router,
    chat_tree.router,
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
