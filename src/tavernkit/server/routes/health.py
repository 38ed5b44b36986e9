"""``GET /health``: the server is up and its store answers (no sign-in needed)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from tavernkit.server.state import ServerState, server_state

__all__ = ["router"]

router = APIRouter(tags=["server"])


class Health(BaseModel):
    status: str
    accounts: bool


@router.get("/health")
async def health(state: Annotated[ServerState, Depends(server_state)]) -> Health:
    await state.tavern.store.count_users()
    return Health(status="ok", accounts=state.settings.accounts)
