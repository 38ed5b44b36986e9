"""The server's routers, included by :func:`~tavernkit.server.app.create_app` in this order.
A new group of routes is a module here with a ``router`` and one line in :data:`ROUTERS`."""

from __future__ import annotations

from fastapi import APIRouter

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

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    auth.router,
    characters.router,
    chats.router,
    documents.router,
    profiles.router,
    profiles.shared_router,
    variables.router,
    transfer.router,
    turns.router,
    groups.router,
    memory.router,
    settings.router,
    mcp.router,
    tasks.router,
    openai.router,
    ui.router,
)
