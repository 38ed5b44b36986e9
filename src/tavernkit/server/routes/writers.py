"""A character's writer: the connection profile and preset its turns use instead of the
user's selection (:mod:`tavernkit.chat.writer` says the precedence). Stored on the card as
``data.extensions.tavernkit.writer``, so the card editor's save and an exported card carry
it too; this route sets it alone, each name checked first (404 naming a profile or preset
that is not stored, and nothing is written then)."""

from __future__ import annotations

import copy

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.chat.writer import Writer, extensions_with_writer, writer_of
from tavernkit.errors import FormatError, NotFound
from tavernkit.server.auth import UserTavern
from tavernkit.store.record_types import StoredRecord

__all__ = ["router"]

router = APIRouter(prefix="/characters", tags=["characters"])


class WriterChoice(BaseModel):
    """The writer to set (``null`` or left out: that part follows the chat)."""

    model_config = ConfigDict(extra="forbid")

    #: a connection profile's name
    profile: str | None = Field(None, max_length=200)
    #: a chat-completion or text-completion preset's name
    preset: str | None = Field(None, max_length=200)


class CharacterWriter(BaseModel):
    character_id: str
    character: str
    profile: str | None
    preset: str | None


def _view(stored: StoredRecord) -> CharacterWriter:
    data = stored.data.get("data")
    extensions = data.get("extensions") if isinstance(data, dict) else None
    writer = writer_of(extensions if isinstance(extensions, dict) else None)
    return CharacterWriter(
        character_id=stored.info.id,
        character=stored.info.name,
        profile=writer.profile,
        preset=writer.preset,
    )


async def _preset_name(tk: UserTavern, name: str) -> str:
    for kind in ("chat_preset", "textgen_preset"):
        try:
            return (await tk.store.get_record(kind, name, owner=tk.owner)).info.name
        except NotFound:
            continue
    raise NotFound(f"no chat-completion or text-completion preset named {name!r}")


@router.get("/{ref}/writer")
async def get_writer(ref: str, tk: UserTavern) -> CharacterWriter:
    return _view(await tk.store.get_record("character", ref, owner=tk.owner))


@router.put("/{ref}/writer")
async def set_writer(ref: str, body: WriterChoice, tk: UserTavern) -> CharacterWriter:
    """Set the character's writer (both ``null``: none, its turns follow the chat)."""
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    profile = (await tk.profiles.get(body.profile)).name if body.profile else None
    preset = await _preset_name(tk, body.preset) if body.preset else None
    card = copy.deepcopy(stored.data)
    data = card.setdefault("data", {})
    if not isinstance(data, dict):
        raise FormatError("the card has no data object", field="data")
    extensions = data.get("extensions") or {}
    if not isinstance(extensions, dict):
        raise FormatError("the card's extensions are not an object", field="data.extensions")
    data["extensions"] = extensions_with_writer(extensions, Writer(profile, preset))
    await tk.store.put("character", card, owner=tk.owner, id=stored.info.id, name=stored.info.name)
    return _view(await tk.store.get_record("character", stored.info.id, owner=tk.owner))
