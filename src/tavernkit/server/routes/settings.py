"""The caller's settings over HTTP: world info (scan depth, budget, recursion, the global
lorebooks...), the prompt (context size, response length, instruct mode...), reasoning
(auto-parse, template...) and the compatibility mode.

``PATCH /settings`` sets only the keys it names (:mod:`tavernkit.assist.settings_edit`: an
unknown key, a bad value or a global lorebook that is not stored is 422 naming
``section.key``, and nothing is stored). Memory is ``/memory/settings``; the selections are
set where their records are (``/profiles``, ``/personas``...).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.assist.settings_edit import settings_view, update_settings
from tavernkit.server.auth import UserTavern

__all__ = ["router"]

router = APIRouter(prefix="/settings", tags=["settings"])


class SettingsBody(BaseModel):
    #: world info: ``depth``, ``budget`` (percent of the context), ``recursive``,
    #: ``global_books`` (lorebook names)...
    world_info: dict[str, Any]
    #: the prompt: ``max_context``, ``amount_gen`` (response tokens), ``instruct_enabled``...
    prompt: dict[str, Any]
    #: reasoning: ``auto_parse``, ``add_to_prompts``, ``template``...
    reasoning: dict[str, Any]
    #: ``"st-1.18"`` reproduces SillyTavern 1.18's known bugs; ``"default"`` fixes them
    compat: str


class SettingsPatch(BaseModel):
    """The keys to set, per section (a section left out is unchanged)."""

    model_config = ConfigDict(extra="forbid")

    world_info: dict[str, Any] = Field(default_factory=dict, max_length=100)
    prompt: dict[str, Any] = Field(default_factory=dict, max_length=100)
    reasoning: dict[str, Any] = Field(default_factory=dict, max_length=100)
    compat: Literal["default", "st-1.18"] | None = None


@router.get("")
async def get_settings(tk: UserTavern) -> SettingsBody:
    """The caller's settings (SillyTavern's defaults until some are set)."""
    return SettingsBody.model_validate(settings_view(await tk.settings()))


@router.patch("")
async def patch_settings(body: SettingsPatch, tk: UserTavern) -> SettingsBody:
    changes: dict[str, Any] = {
        name: values
        for name, values in (
            ("world_info", body.world_info),
            ("prompt", body.prompt),
            ("reasoning", body.reasoning),
        )
        if values
    }
    if body.compat is not None:
        changes["compat"] = body.compat
    return SettingsBody.model_validate(settings_view(await update_settings(tk.runtime, changes)))
