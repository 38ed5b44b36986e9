"""What personas have beyond their JSON (``/personas`` is a document route): the avatar image,
and who speaks as whom when a turn names no persona, SillyTavern's persona locks: the persona
locked to a chat (``chat_metadata.persona``), the one locked to a character (its
"connection"), and the default (``PATCH /settings/selections``). A chat's lock wins over its
character's, which wins over the default.

Every persona is named by id or name; one that does not exist is a 404 before anything is
written.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import UploadFile
from starlette.responses import Response

from tavernkit.chat.personas import PersonaLocks, Personas
from tavernkit.errors import FormatError, NotFound
from tavernkit.server.auth import UserTavern
from tavernkit.server.avatars import IMPORT_FORMATS, open_bounded
from tavernkit.server.routes.characters import _image_type

__all__ = ["router"]

router = APIRouter(tags=["personas"])

#: the largest avatar kept (SillyTavern's avatars are small PNGs)
AVATAR_MAX_BYTES = 8 * 1024 * 1024


def _personas(tk: UserTavern) -> Personas:
    return Personas(tk.store, owner=tk.owner)


@router.get("/personas/{ref}/avatar", response_class=Response)
async def get_persona_avatar(ref: str, tk: UserTavern) -> Response:
    """The persona's avatar image as uploaded (404 when it has none)."""
    persona_id = (await _personas(tk).get(ref))[0]
    image = await tk.store.get_blob("persona", persona_id, "avatar", owner=tk.owner)
    if image is None:
        raise NotFound(f"the persona {ref!r} has no avatar")
    return Response(image, media_type=_image_type(image), headers={"Cache-Control": "no-cache"})


class AvatarStored(BaseModel):
    #: where the image is read back
    avatar_url: str
    media_type: str
    size: int


@router.put(
    "/personas/{ref}/avatar",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "required": ["file"],
                    }
                }
            },
        }
    },
)
async def put_persona_avatar(ref: str, request: Request, tk: UserTavern) -> AvatarStored:
    """Store the uploaded image (multipart ``file``: PNG, JPEG, GIF or WebP, at most 40
    million pixels) as the persona's avatar, replacing the one before."""
    persona_id = (await _personas(tk).get(ref))[0]  # 404 before the upload is read
    async with request.form(max_files=1, max_fields=1) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise FormatError("send the image as the multipart field 'file'", field="file")
        image = await upload.read(AVATAR_MAX_BYTES + 1)
    media = _image_type(image)
    if not media.startswith("image/"):
        raise FormatError("an avatar is a PNG, JPEG, GIF or WebP image", field="file")
    if len(image) > AVATAR_MAX_BYTES:
        raise FormatError(f"an avatar is at most {AVATAR_MAX_BYTES} bytes", field="file")
    # its header only (cheap): a decompression bomb is refused with its size, unstored
    open_bounded(image, IMPORT_FORMATS).close()
    await tk.store.set_blob("persona", persona_id, "avatar", image, owner=tk.owner)
    return AvatarStored(
        avatar_url=f"/personas/{persona_id}/avatar", media_type=media, size=len(image)
    )


@router.delete("/personas/{ref}/avatar", status_code=204)
async def delete_persona_avatar(ref: str, tk: UserTavern) -> None:
    persona_id = (await _personas(tk).get(ref))[0]
    await tk.store.set_blob("persona", persona_id, "avatar", None, owner=tk.owner)


class PersonaRef(BaseModel):
    id: str
    name: str


class ChatPersona(BaseModel):
    """Who the chat speaks as when a turn names no persona, and why."""

    #: the persona locked to this chat
    chat: PersonaRef | None
    #: the persona locked to the chat's character
    character: PersonaRef | None
    #: the default persona
    default: PersonaRef | None
    #: the first of the three (``None``: no persona, the user's name)
    active: PersonaRef | None
    source: Literal["chat", "character", "default"] | None


class PersonaChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: a persona's id or name; ``null`` unlocks
    persona: str | None = Field(max_length=200)


async def _chat_persona(personas: Personas, locks: PersonaLocks) -> ChatPersona:
    async def ref(persona_id: str | None) -> PersonaRef | None:
        if persona_id is None:
            return None
        return PersonaRef(id=persona_id, name=(await personas.get(persona_id))[1].name)

    return ChatPersona(
        chat=await ref(locks.chat),
        character=await ref(locks.character),
        default=await ref(locks.default),
        active=await ref(locks.active),
        source=locks.source,
    )


@router.get("/chats/{chat_id}/persona")
async def get_chat_persona(chat_id: str, tk: UserTavern) -> ChatPersona:
    personas = _personas(tk)
    return await _chat_persona(personas, await personas.locks(chat_id))


@router.put("/chats/{chat_id}/persona")
async def lock_chat_persona(chat_id: str, body: PersonaChoice, tk: UserTavern) -> ChatPersona:
    """Lock the persona to the chat (``null``: unlock; the character's lock or the default
    applies again)."""
    personas = _personas(tk)
    await tk.store.get_chat_info(chat_id, owner=tk.owner)  # the chat first: 404 for another's
    await personas.set_for_chat(chat_id, body.persona)
    return await _chat_persona(personas, await personas.locks(chat_id))


class CharacterPersona(BaseModel):
    character: PersonaRef
    #: the persona locked to the character (``None``: none)
    persona: PersonaRef | None


@router.put("/characters/{ref}/persona")
async def lock_character_persona(ref: str, body: PersonaChoice, tk: UserTavern) -> CharacterPersona:
    """Lock the persona to the character: its chats speak as it unless a chat has a persona
    locked of its own (``null``: unlock)."""
    personas = _personas(tk)
    info = (await tk.store.get_record("character", ref, owner=tk.owner)).info
    await personas.set_for_character(info.id, body.persona)
    persona = None
    if body.persona is not None:
        persona_id, found = await personas.get(body.persona)
        persona = PersonaRef(id=persona_id, name=found.name)
    return CharacterPersona(character=PersonaRef(id=info.id, name=info.name), persona=persona)
