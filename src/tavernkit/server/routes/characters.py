"""Characters: a paged list of small lines (name, dates, favourite, tags, thumbnail and avatar
URLs; never the cards) that filters by tag and favourite and sorts, the full card on demand,
create, replace, the avatar image (read, upload, remove) and its thumbnail, the favourite flag,
the linked lorebooks, rename, duplicate and delete. Cards also come in whole (a PNG, CHARX or
JSON) through ``/import``."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import BaseModel, Field

from tavernkit.chat.writer import check_writer
from tavernkit.errors import Conflict, FormatError, LimitExceeded, NotFound
from tavernkit.server.auth import UserTavern
from tavernkit.server.avatars import AVATAR_MAX_BYTES, avatar_png
from tavernkit.server.card_facets import Facets
from tavernkit.server.routes._common import (
    Duplicate,
    IfMatch,
    Page,
    PageQuery,
    RecordBody,
    RecordLine,
    Rename,
    State,
    record_revision,
    tag_revision,
)
from tavernkit.store.record_types import ListOrder, RecordInfo
from tavernkit.store.revisions import check_revision, revision_lock

__all__ = ["router"]

router = APIRouter(prefix="/characters", tags=["characters"])

_NO_FACETS = Facets(fav=False, tags=())


class CharacterLine(RecordLine):
    #: whether the character has an avatar image (a JSON card has none)
    has_avatar: bool = False
    #: each changes when the record is written, so a browser never shows an old image;
    #: ``None`` without an avatar (the UI shows the name's initial, and asks for nothing)
    avatar_url: str | None = None
    thumbnail_url: str | None = None
    #: SillyTavern's favourite flag (``data.extensions.fav``)
    fav: bool = False
    tags: list[str] = Field(default_factory=list)

    @classmethod
    def of_info(cls, info: RecordInfo, facets: Facets, *, has_avatar: bool) -> CharacterLine:
        version = f"?v={int(info.updated.timestamp() * 1_000_000)}"
        return cls(
            **RecordLine.of(info).model_dump(),
            has_avatar=has_avatar,
            avatar_url=f"/characters/{info.id}/avatar{version}" if has_avatar else None,
            thumbnail_url=f"/characters/{info.id}/thumbnail{version}" if has_avatar else None,
            fav=facets.fav,
            tags=list(facets.tags),
        )


class CharacterBody(RecordBody):
    #: whether the character has an avatar image (``GET /characters/{ref}/avatar`` answers)
    has_avatar: bool = False


class TagCount(BaseModel):
    name: str
    #: how many of the user's characters carry it
    count: int


class CharacterPage(Page[CharacterLine]):
    #: every tag of the user's characters, most used first (``?facets=true`` only)
    tags: list[TagCount] | None = None


class Favourite(BaseModel):
    fav: bool


class LinkedBooks(BaseModel):
    #: the lorebooks (ids or names) linked to the character, in order (the first is the one
    #: SillyTavern's ``data.extensions.world`` names); an empty list unlinks them all
    books: list[str] = Field(max_length=100)


#: the store's listing orders (each read through its indexes)
SortOrder = ListOrder


@router.get("")
async def list_characters(
    tk: UserTavern,
    state: State,
    paging: PageQuery,
    q: Annotated[str | None, Query(max_length=200, description="name contains")] = None,
    tag: Annotated[
        list[str] | None, Query(max_length=20, description="carries every one of these tags")
    ] = None,
    fav: Annotated[bool | None, Query(description="favourites only (or none of them)")] = None,
    sort: Annotated[
        SortOrder | None,
        Query(
            description="name (A-Z), name_desc (Z-A), newest / oldest (made), updated (edited),"
            " chatted (latest chat first), fav (favourites first, then by name); the"
            " default is by name"
        ),
    ] = None,
    facets: Annotated[bool, Query(description="add every tag and its count")] = False,
) -> CharacterPage:
    # Filters, orders and tag counts are read from the store's indexes and kept counts
    # (migrations 011, 013, 014); the cards are read (once per revision, then cached) only
    # for the page's lines.
    found = await tk.store.list_page(
        "character",
        owner=tk.owner,
        offset=paging.offset,
        limit=paging.limit,
        name_contains=q or None,
        order=sort or "name",
        fav=fav,
        tags=[t for t in tag or [] if t.strip()],
    )
    known = await state.card_facets.of(tk.store, found.items, owner=tk.owner)
    tag_counts = _count_tags(await tk.store.character_tags(owner=tk.owner)) if facets else None
    pictured = await state.avatars.of(tk.store, found.items, owner=tk.owner)
    return CharacterPage(
        items=[
            CharacterLine.of_info(i, known.get(i.id, _NO_FACETS), has_avatar=i.id in pictured)
            for i in found.items
        ],
        total=found.total,
        offset=paging.offset,
        limit=paging.limit,
        tags=tag_counts,
    )


def _count_tags(spellings: Sequence[tuple[str, int]]) -> list[TagCount]:
    """The store's (spelling, cards) rows as one count per tag whatever its case, named by
    its most used spelling, most used first."""
    counts: dict[str, list[Any]] = {}  # casefolded -> [name, count, count of that name]
    for name, n in spellings:
        entry = counts.setdefault(name.casefold(), [name, 0, n])
        entry[1] += n
        if n > entry[2]:
            entry[0], entry[2] = name, n
    ordered = sorted(counts.values(), key=lambda e: (-e[1], e[0].casefold()))
    return [TagCount(name=name, count=count) for name, count, _ in ordered]


@router.post("", status_code=201)
async def create_character(
    body: Annotated[dict[str, Any], Body(description="the card (V2 or V3 JSON)")],
    tk: UserTavern,
    state: State,
) -> RecordBody:
    """A new character from its card JSON (``{"spec", "spec_version", "data": {...}}``): 422
    naming the field when it does not validate, 409 when its name is taken."""
    card, name = _checked_card(body)
    await _name_free(tk, name, None)
    ref = await tk.store.put("character", card, owner=tk.owner, name=name)
    return _remembered(state, await tk.store.get_record("character", ref.id, owner=tk.owner))


@router.get("/{ref}")
async def get_character(
    ref: str, tk: UserTavern, state: State, response: Response
) -> CharacterBody:
    """The full card (V2/V3 JSON as stored) of the character with id or name ``ref``, and
    whether it has an avatar; its revision also as the ``ETag``."""
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    body = CharacterBody(
        **RecordBody.of_record(stored).model_dump(),
        has_avatar=await state.avatars.has(tk.store, stored.info, owner=tk.owner),
    )
    tag_revision(response, body.revision)
    return body


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


_IMAGE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in ("image/png", "image/jpeg", "image/webp")
        },
    }
}


@router.put("/{ref}/avatar", openapi_extra=_IMAGE_BODY)
async def put_avatar(
    ref: str,
    request: Request,
    tk: UserTavern,
    state: State,
    crop: Annotated[bool, Query(description="cut the centred 2:3 portrait out of it")] = False,
) -> CharacterLine:
    """Replace the avatar with the request body: a PNG, JPEG or WebP image of at most 10 MiB
    (413 over it; 422 naming ``avatar`` when it is not such an image). It is stored as a PNG,
    at most 1536 px a side."""
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    image = await _capped_body(request, AVATAR_MAX_BYTES)
    png = await asyncio.to_thread(avatar_png, image, crop=crop)
    # a write of the record with the blob: its update time (and so its thumbnail) changes
    await tk.store.put(
        "character",
        stored.data,
        owner=tk.owner,
        id=stored.info.id,
        name=stored.info.name,
        blobs={"avatar": png},
    )
    return await _line(
        tk, state, await tk.store.get_record("character", stored.info.id, owner=tk.owner)
    )


@router.delete("/{ref}/avatar", status_code=204)
async def delete_avatar(ref: str, tk: UserTavern) -> None:
    """Remove the avatar (a PNG export then carries a placeholder image)."""
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    await tk.store.set_blob("character", stored.info.id, "avatar", None, owner=tk.owner)
    await tk.store.put(
        "character", stored.data, owner=tk.owner, id=stored.info.id, name=stored.info.name
    )


async def _capped_body(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise LimitExceeded(
                f"the image is larger than {limit // (1024 * 1024)} MiB", field="avatar"
            )
        chunks.append(chunk)
    return b"".join(chunks)


@router.get("/{ref}/thumbnail", response_class=Response)
async def get_thumbnail(ref: str, tk: UserTavern, state: State) -> Response:
    """The avatar at most 128 px a side (WebP)."""
    info, _ = await tk.store.get_record_text("character", ref, owner=tk.owner)
    thumb = await state.thumbnails.get(info.id, info.updated, await _avatar(tk, info.id))
    return Response(thumb, media_type="image/webp", headers={"Cache-Control": "private"})


@router.put("/{ref}")
async def replace_character(
    ref: str,
    body: Annotated[dict[str, Any], Body()],
    tk: UserTavern,
    state: State,
    revision: IfMatch,
) -> RecordBody:
    """Replace the card's JSON (it keeps its id, avatar, chats and links). Send the card as
    read, with the fields changed: what the JSON holds is what is stored. A new ``data.name``
    renames the character (409 when another has it; its chats follow); V1 top-level copies
    the card carries are refreshed from ``data``. With ``If-Match: <revision>``, a card
    changed since it was read is left as it is (409 ``StaleRevision``)."""
    if revision is None:
        return await _replace_character(ref, body, tk, state, None)
    key = (await tk.store.get_record("character", ref, owner=tk.owner)).info.id
    async with revision_lock("record", tk.owner, "character", key):
        return await _replace_character(key, body, tk, state, revision)


async def _replace_character(
    ref: str, body: dict[str, Any], tk: UserTavern, state: State, revision: str | None
) -> RecordBody:
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    current = record_revision(stored.info, stored.data)
    check_revision(revision, current, f"the character {stored.info.name!r}")
    card, name = _checked_card(body)
    if name != stored.info.name:
        await _name_free(tk, name, stored.info.id)
    await tk.store.put("character", card, owner=tk.owner, id=stored.info.id, name=name)
    if name != stored.info.name:
        await tk.store.set_chats_character_name(stored.info.id, name, owner=tk.owner)
    return _remembered(
        state, await tk.store.get_record("character", stored.info.id, owner=tk.owner)
    )


@router.put("/{ref}/fav")
async def set_favourite(ref: str, body: Favourite, tk: UserTavern, state: State) -> CharacterLine:
    """Mark or unmark the character as a favourite (``data.extensions.fav``, as SillyTavern)."""
    stored = await tk.store.get_record("character", ref, owner=tk.owner)
    card = copy.deepcopy(stored.data)
    data = card.setdefault("data", {})
    if not isinstance(data, dict):
        raise FormatError("the card has no data object", field="data")
    extensions = data.setdefault("extensions", {})
    if not isinstance(extensions, dict):
        raise FormatError("the card's extensions are not an object", field="data.extensions")
    extensions["fav"] = body.fav
    if "fav" in card:
        card["fav"] = body.fav
    await tk.store.put("character", card, owner=tk.owner, id=stored.info.id, name=stored.info.name)
    return await _line(
        tk, state, await tk.store.get_record("character", stored.info.id, owner=tk.owner)
    )


@router.get("/{ref}/lorebooks")
async def linked_lorebooks(ref: str, tk: UserTavern) -> list[RecordLine]:
    """The lorebooks linked to the character (its world info), in order."""
    info = (await tk.store.get_record("character", ref, owner=tk.owner)).info
    return [
        RecordLine.of(b)
        for b in await tk.store.links("character", info.id, "lorebook", owner=tk.owner)
    ]


@router.put("/{ref}/lorebooks")
async def link_lorebooks(ref: str, body: LinkedBooks, tk: UserTavern) -> list[RecordLine]:
    """Link exactly these lorebooks to the character, in this order (404 naming a book that
    does not exist, before anything changes)."""
    info = (await tk.store.get_record("character", ref, owner=tk.owner)).info
    wanted: list[RecordInfo] = []
    for book in body.books:
        found = (await tk.store.get_record("lorebook", book, owner=tk.owner)).info
        if all(w.id != found.id for w in wanted):
            wanted.append(found)
    linked = await tk.store.links("character", info.id, "lorebook", owner=tk.owner)
    if [b.id for b in linked] != [w.id for w in wanted]:
        for book_info in linked:
            await tk.store.unlink(
                "character", info.id, "lorebook", "lorebook", book_info.id, owner=tk.owner
            )
        for book_info in wanted:
            await tk.store.link(
                "character", info.id, "lorebook", "lorebook", book_info.id, owner=tk.owner
            )
    return [
        RecordLine.of(b)
        for b in await tk.store.links("character", info.id, "lorebook", owner=tk.owner)
    ]


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


# -- helpers ------------------------------------------------------------------------------


async def _line(tk: UserTavern, state: State, stored: Any) -> CharacterLine:
    facets = state.card_facets.remember(stored.info, stored.data)
    has_avatar = await state.avatars.has(tk.store, stored.info, owner=tk.owner)
    return CharacterLine.of_info(stored.info, facets, has_avatar=has_avatar)


def _remembered(state: State, stored: Any) -> RecordBody:
    state.card_facets.remember(stored.info, stored.data)
    return RecordBody.of_record(stored)


async def _name_free(tk: UserTavern, name: str, own_id: str | None) -> None:
    try:
        other = await tk.store.get_record("character", name, owner=tk.owner)
    except NotFound:
        return
    if other.info.id != own_id:
        raise Conflict(f"a character named {name!r} exists already")


_ROLES = ("system", "user", "assistant")
#: a V1 top-level copy -> where in ``data`` (and its extensions) it comes from
_V1_COPIES = {
    "name": ("name",),
    "description": ("description",),
    "personality": ("personality",),
    "scenario": ("scenario",),
    "first_mes": ("first_mes",),
    "mes_example": ("mes_example",),
    "creatorcomment": ("creator_notes",),
    "tags": ("tags",),
    "talkativeness": ("extensions", "talkativeness"),
    "fav": ("extensions", "fav"),
}


def _checked_card(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The card to store and its name: ``data.name`` must be there, and the SillyTavern
    extensions the editor writes well formed (the store's model checks the rest); the V1
    copies the card has are refreshed from ``data``."""
    data = body.get("data")
    if not isinstance(data, dict):
        raise FormatError("a card needs a data object", field="data")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise FormatError("a character needs a name", field="data.name")
    if len(name) > 500:
        raise FormatError("the name is longer than 500 characters", field="data.name")
    name = name.strip()
    card = dict(body)
    card["data"] = data = {**data, "name": name}
    extensions = data.get("extensions", {})
    if not isinstance(extensions, dict):
        raise FormatError("must be an object", field="data.extensions")
    _check_extensions(extensions)
    for top, path in _V1_COPIES.items():
        if top not in card:
            continue
        value: Any = data
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        if value is not None:
            card[top] = value
    return card, name


def _check_extensions(extensions: Mapping[str, Any]) -> None:
    where = "data.extensions"
    if "talkativeness" in extensions:
        raw = extensions["talkativeness"]
        try:
            value = float(raw) if not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None or not 0.0 <= value <= 1.0:
            raise FormatError("must be a number from 0 to 1", field=f"{where}.talkativeness")
    world = extensions.get("world")
    if world is not None and not isinstance(world, str):
        raise FormatError("must be a lorebook's name", field=f"{where}.world")
    check_writer(extensions)  # data.extensions.tavernkit.writer (chat/writer.py)
    depth = extensions.get("depth_prompt")
    if depth is None:
        return
    where = f"{where}.depth_prompt"
    if not isinstance(depth, dict):
        raise FormatError("must be an object", field=where)
    if not isinstance(depth.get("prompt", ""), str):
        raise FormatError("must be text", field=f"{where}.prompt")
    level = depth.get("depth", 4)
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 10_000:
        raise FormatError("must be a whole number from 0 to 10000", field=f"{where}.depth")
    if depth.get("role", "system") not in _ROLES:
        raise FormatError("must be system, user or assistant", field=f"{where}.role")
