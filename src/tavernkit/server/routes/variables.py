"""Global variables (``{{getglobalvar}}``/``{{setglobalvar}}``): one row per variable."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tavernkit.errors import NotFound
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import VariableValue

__all__ = ["router"]

router = APIRouter(prefix="/variables", tags=["variables"])


@router.get("")
async def get_variables(tk: UserTavern) -> dict[str, Any]:
    return await tk.store.get_global_variables(owner=tk.owner)


@router.put("/{name}")
async def set_variable(name: str, body: VariableValue, tk: UserTavern) -> VariableValue:
    await tk.store.set_global_variable(name, body.value, owner=tk.owner)
    return body


@router.delete("/{name}", status_code=204)
async def delete_variable(name: str, tk: UserTavern) -> None:
    if name not in await tk.store.get_global_variables(owner=tk.owner):
        raise NotFound(f"no global variable {name!r}")
    await tk.store.delete_global_variable(name, owner=tk.owner)
