"""Characters: a paged list of small lines (name, dates, thumbnail and avatar URLs; never the
cards), the full card on demand, the avatar image and its thumbnail, rename, duplicate,
replace and delete. Cards come in whole (a PNG, CHARX or JSON) through ``/import``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from pydantic import BaseModel, Field

from tavernkit.errors import NotFound
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import Page, PageQuery, RecordBody, RecordLine, State, page_of

__all__ = ["router"]

router = APIRouter(prefix="/characters", tags=["characters"])


class CharacterLine(RecordLine):
    avatar_url: str
    thumbnail_url: str


class Rename(BaseModel):
    name: str = Field(min_length=1, max_length=500)


class Duplicate(BaseModel):
    name: str | None = Field(default=None, min_length=1, max_length=500)


@router.get("")
async def list_characters(
    tk: UserTavern,
    paging: PageQuery,
    q: Annotated[str | None, Query(max_length=200, description="name contains")] = None,
) -> Page[CharacterLine]:
    infos = await tk.store.list("character", owner=tk.owner)
    if q:
        needle = q.casefold()
        infos = [i for i in infos if needle in i.name.casefold()]
    items, total = page_of(infos, paging)
    return Page(
        items=[
            CharacterLine(
                **RecordLine.of(i).model_dump(),
                avatar_url=f"/characters/{i.id}/avatar",
                thumbnail_url=f"/characters/{i.id}/thumbnail",
            )
            for i in items
        ],
        total=total,
        offset=paging.offset,
        limit=paging.limit,
    )


@router.get("/{ref}")
async def get_character(ref: str, tk: UserTavern) -> RecordBody:
    """The full card (V2/V3 JSON as stored) of the character with id or name ``ref``."""
    return RecordBody.of_record(await tk.store.get_record("character", ref, owner=tk.owner))


async def _avatar(tk: UserTavern, ref: str) -> bytes:
    image = await tk.store.get_blob("character", ref, "avatar", owner=tk.owner)
    if image is None:
        raise NotFound(f"the character {ref!r} has no avatar")
    return image


#: how an image file starts -> its media type (a card's avatar is a PNG, a CHARX's may not be)
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
)


def _image_type(image: bytes) -> str:
    if image[:4] == b"RIFF" and image[8:12] == b"WEBP":
        return "image/webp"
    for magic, media in _IMAGE_MAGIC:
        if image.startswith(magic):
            return media
    return "application/octet-stream"


@router.get("/{ref}/avatar", response_class=Response)
async def get_avatar(ref: str, tk: UserTavern) -> Response:
    """The avatar as stored (the image of a PNG card, without re-encoding)."""
    image = await _avatar(tk, ref)
    return Response(image, media_type=_image_type(image), headers={"Cache-Control": "private"})


@router.get("/{ref}/thumbnail", response_class=Response)
async def get_thumbnail(ref: str, tk: UserTavern, state: State) -> Response:
    """The avatar at most 128 px a side (WebP)."""
    info = (await tk.store.get_record("character", ref, owner=tk.owner)).info
    thumb = state.thumbnails.get(info.id, info.updated, await _avatar(tk, info.id))
    return Response(thumb, media_type="image/webp", headers={"Cache-Control": "private"})


@router.put("/{ref}")
async def replace_character(
    ref: str, body: Annotated[dict[str, Any], Body()], tk: UserTavern
) -> RecordBody:
    """Replace the card's JSON (it keeps its id, avatar, chats and links)."""
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    await tk.store.put("character", body, owner=tk.owner, id=stored.info.id)
    return RecordBody.of_record(
        await tk.store.get_record("character", stored.info.id, owner=tk.owner)
    )


@router.post("/{ref}/rename")
async def rename_character(ref: str, body: Rename, tk: UserTavern) -> RecordLine:
    return RecordLine.of(await tk.library.rename_character(ref, body.name))


@router.post("/{ref}/duplicate", status_code=201)
async def duplicate_character(ref: str, body: Duplicate, tk: UserTavern) -> RecordLine:
    return RecordLine.of(await tk.library.duplicate_character(ref, body.name))


@router.delete("/{ref}", status_code=204)
async def delete_character(
    ref: str, tk: UserTavern, with_chats: Annotated[bool, Query()] = False
) -> None:
    """Delete the character; ``with_chats`` deletes its chats too."""
    await tk.library.delete_character(ref, with_chats=with_chats)
