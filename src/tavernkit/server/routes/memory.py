"""Memory over HTTP: the caller's memory settings (vectorized world info, chat memory, the
rolling summary: ``Settings.memory``) and a chat's summary.

``PATCH /memory/settings`` sets only the keys it names (:mod:`tavernkit.assist.memory_settings`:
an unknown key or a bad value is 422 naming ``section.key``, and nothing is stored; an
embedder whose profile's URL the caller's egress policy refuses is 403 ``EgressRefused``).
``PUT /chats/{id}/summary`` edits the summary the next turn injects (SillyTavern's summary box:
it is kept on the second-to-last message, so the chat needs two messages).
``POST /chats/{id}/summary/now`` makes one now with the chat's model whatever the summary
source (SillyTavern's "Summarize now"); it calls the model, so it counts as a turn against the
caller's rate.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.assist.memory_settings import memory_settings, update_memory_settings
from tavernkit.assist.summary import current_summary, set_summary, summarize
from tavernkit.errors import NotFound
from tavernkit.facade import Tavern
from tavernkit.models.memory import MemorySettings
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import ModelCall, check_egress

__all__ = ["router"]

router = APIRouter(tags=["memory"])


class MemoryPatch(BaseModel):
    """The keys to set, per section (a section left out is unchanged)."""

    model_config = ConfigDict(extra="forbid")

    #: Vector Storage (``enabled_chats`` is chat memory, ``enabled_world_info`` vectorized
    #: entries)
    vectors: dict[str, Any] = Field(default_factory=dict, max_length=100)
    #: Summarize (``source: "main"`` turns it on)
    summary: dict[str, Any] = Field(default_factory=dict, max_length=100)


class SummaryBody(BaseModel):
    #: the summary the next turn injects (``""``: none)
    text: str


class SummaryEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=100_000)


class SummaryStored(SummaryBody):
    #: the message that holds it
    message_index: int


@router.get("/memory/settings")
async def get_memory_settings(tk: UserTavern) -> MemorySettings:
    """The caller's memory settings (SillyTavern's defaults, all off, until set)."""
    return await memory_settings(tk.runtime)


@router.patch("/memory/settings")
async def patch_memory_settings(body: MemoryPatch, tk: UserTavern) -> MemorySettings:
    await _check_embedder(tk, body.vectors.get("embedder"))
    changes = {k: v for k, v in (("vectors", body.vectors), ("summary", body.summary)) if v}
    return await update_memory_settings(tk.runtime, changes)


async def _check_embedder(tk: Tavern, spec: object) -> None:
    """An embedder naming a profile (``profile:<name>``) posts to that profile's base URL:
    refused now when the caller's egress policy refuses it (nothing is stored then)."""
    if tk.runtime.egress is None or not isinstance(spec, str):
        return
    spec = spec.strip()
    if not spec.startswith("profile:"):
        return
    try:
        profile = await tk.profiles.get(spec.removeprefix("profile:"))
    except NotFound:
        return  # the turn says the embedder names no profile
    await check_egress(tk, profile.base_url, field="vectors.embedder")


@router.get("/chats/{chat_id}/summary")
async def get_summary(chat_id: str, tk: UserTavern) -> SummaryBody:
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    return SummaryBody(text=await current_summary(tk.runtime, info.id))


@router.put("/chats/{chat_id}/summary")
async def put_summary(chat_id: str, body: SummaryEdit, tk: UserTavern) -> SummaryStored:
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    index = await set_summary(tk.runtime, info.id, body.text)
    return SummaryStored(text=body.text, message_index=index)


class SummaryMade(BaseModel):
    #: the new summary (``""``: nothing new to summarize, nothing stored)
    text: str
    #: the message that holds it (``None`` when nothing was stored)
    message_index: int | None


@router.post("/chats/{chat_id}/summary/now")
async def summarize_now(chat_id: str, tk: UserTavern, caller: ModelCall) -> SummaryMade:
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    update = await summarize(tk.context(info.id), force=True)
    if update is None:
        return SummaryMade(text="", message_index=None)
    return SummaryMade(text=update.text, message_index=update.message_index)
