"""A lorebook beyond its whole JSON (``/lorebooks/{ref}`` in :mod:`.documents`): rename and
duplicate it, where it is bound and binding it, and its entries one at a time, so an editor of
a 2,000-entry book sends the entry it changed, not the book
(:mod:`tavernkit.lorebook_admin`).

- ``POST /lorebooks/{ref}/rename`` ``{"name"}``; ``POST /lorebooks/{ref}/duplicate``
  ``{"name"?}``: the book's line; a taken name is 409 ``NameTaken``.
- ``GET /lorebooks/{ref}/bindings``: where it is bound; ``POST`` ``{"scope", "target"?}``
  binds it, ``DELETE /lorebooks/{ref}/bindings/{scope}?target=`` unbinds it (both answer
  where it is bound now). ``GET /lorebook-bindings``: every book's, for the list.
- ``GET /lorebooks/{ref}/entries[?content=]``: every entry's line, ``{"book", "fields",
  "entries": [[comment, key, ..., uid], ...]}`` (no content: the editor's list), or only
  those whose content holds the text.
- ``POST /lorebooks/{ref}/entries``: a new entry (the server picks the uid: the lowest free
  one, as SillyTavern does); ``GET``, ``PUT`` (whole), ``PATCH`` (the keys given) and
  ``DELETE /lorebooks/{ref}/entries/{uid}``. A value the entry cannot hold is 422 naming the
  entry's field. Each entry carries a ``revision``; a ``PUT`` or ``PATCH`` with
  ``If-Match: <revision>`` of an entry changed since is 409 ``StaleRevision``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.lorebook_admin import Binding, BindingScope, LorebookAdmin
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import Duplicate, IfMatch, RecordLine, Rename, tag_revision
from tavernkit.store.record_types import ENTRY_LINE_FIELDS, RecordInfo
from tavernkit.store.revisions import check_revision, content_revision, revision_lock

__all__ = ["router"]

router = APIRouter(tags=["lorebooks"])

EntryJson = Annotated[dict[str, Any], Body(description="entry fields, as SillyTavern names them")]
Uid = Annotated[str, Path(min_length=1, max_length=40)]


def _admin(tk: UserTavern) -> LorebookAdmin:
    return LorebookAdmin(tk.store, tk.owner)


class BindingLine(BaseModel):
    #: ``global``, ``character``, ``chat`` or ``persona``
    scope: BindingScope
    #: the chat's, character's or persona's id (empty for ``global``)
    id: str
    name: str
    #: how a character uses it: ``link``, ``card`` (``extensions.world``), ``extra`` (charLore)
    via: str = ""
    #: a chat's character
    character_name: str = ""

    @classmethod
    def of(cls, b: Binding) -> BindingLine:
        return cls(scope=b.scope, id=b.id, name=b.name, via=b.via, character_name=b.character_name)


class Bindings(BaseModel):
    book: RecordLine
    used_by: list[BindingLine]

    @classmethod
    def of(cls, found: tuple[RecordInfo, list[Binding]]) -> Bindings:
        info, bindings = found
        return cls(book=RecordLine.of(info), used_by=[BindingLine.of(b) for b in bindings])


class Bind(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: BindingScope
    #: the chat (id), character or persona (id or name); none for ``global``
    target: str | None = Field(default=None, min_length=1, max_length=500)


class Entry(BaseModel):
    #: the entry's key in the book's ``entries``
    uid: str
    #: the entry as stored (SillyTavern's JSON)
    data: dict[str, Any]
    #: changes whenever the entry does (not with the book's other entries); send it as
    #: ``If-Match`` with a change to have a stale one refused (409 ``StaleRevision``)
    revision: str = ""

    @classmethod
    def of(cls, entry: dict[str, Any]) -> Entry:
        return cls(uid=str(entry.get("uid")), data=entry, revision=content_revision(entry))


@router.post("/lorebooks/{ref}/rename")
async def rename_lorebook(ref: str, body: Rename, tk: UserTavern) -> RecordLine:
    """Rename the book; the global list, chats, characters and personas that name it follow."""
    return RecordLine.of(await _admin(tk).rename(ref, body.name))


@router.post("/lorebooks/{ref}/duplicate", status_code=201)
async def duplicate_lorebook(ref: str, body: Duplicate, tk: UserTavern) -> RecordLine:
    """A copy of the book's entries under a new name (not bound anywhere)."""
    return RecordLine.of(await _admin(tk).duplicate(ref, body.name))


@router.get("/lorebooks/{ref}/bindings")
async def lorebook_bindings(ref: str, tk: UserTavern) -> Bindings:
    """Where the book is bound: what a turn reads (global, character, chat, persona)."""
    return Bindings.of(await _admin(tk).used_by(ref))


@router.post("/lorebooks/{ref}/bindings")
async def bind_lorebook(ref: str, body: Bind, tk: UserTavern) -> Bindings:
    """Bind the book everywhere (``global``) or to one chat, character or persona (a chat or
    a persona has one book: this one replaces theirs)."""
    return Bindings.of(await _admin(tk).bind(ref, body.scope, body.target))


@router.delete("/lorebooks/{ref}/bindings/{scope}")
async def unbind_lorebook(
    ref: str,
    scope: BindingScope,
    tk: UserTavern,
    target: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
) -> Bindings:
    return Bindings.of(await _admin(tk).unbind(ref, scope, target))


@router.get("/lorebook-bindings")
async def all_lorebook_bindings(tk: UserTavern) -> dict[str, list[BindingLine]]:
    """Where each book is bound, by book id (a book bound nowhere is left out)."""
    admin = _admin(tk)
    ids = {i.name: i.id for i in await tk.store.list("lorebook", owner=tk.owner)}
    return {
        ids[name]: [BindingLine.of(b) for b in found]
        for name, found in (await admin.bindings()).items()
        if name in ids
    }


@router.post("/lorebooks/{ref}/entries", status_code=201)
async def add_lorebook_entry(ref: str, body: EntryJson, tk: UserTavern) -> Entry:
    """A new entry: SillyTavern's new-entry template with the fields given; the server picks
    its uid (the lowest free one)."""
    return Entry.of(await _admin(tk).add_entry(ref, body))


@router.get("/lorebooks/{ref}/entries/{uid}")
async def get_lorebook_entry(ref: str, uid: Uid, tk: UserTavern, response: Response) -> Entry:
    """One entry of the book; its revision also as the ``ETag``."""
    entry = Entry.of(await _admin(tk).entry(ref, uid))
    tag_revision(response, entry.revision)
    return entry


@router.put("/lorebooks/{ref}/entries/{uid}")
async def replace_lorebook_entry(
    ref: str, uid: Uid, body: EntryJson, tk: UserTavern, revision: IfMatch
) -> Entry:
    """Replace the entry whole (it keeps its uid). With ``If-Match: <revision>``, an entry
    changed since it was read is left as it is (409 ``StaleRevision``)."""
    admin = _admin(tk)
    async with _entry_checked(tk, ref, uid, revision):
        return Entry.of(await admin.replace_entry(ref, uid, body))


@router.patch("/lorebooks/{ref}/entries/{uid}")
async def patch_lorebook_entry(
    ref: str, uid: Uid, body: EntryJson, tk: UserTavern, revision: IfMatch
) -> Entry:
    """Set the fields given; the entry's other fields stay, in their place. With
    ``If-Match: <revision>``, an entry changed since it was read is left as it is (409
    ``StaleRevision``)."""
    admin = _admin(tk)
    async with _entry_checked(tk, ref, uid, revision):
        return Entry.of(await admin.patch_entry(ref, uid, body))


@asynccontextmanager
async def _entry_checked(
    tk: UserTavern, ref: str, uid: str, revision: str | None
) -> AsyncIterator[None]:
    """Hold the entry's lock (when a revision is sent) while its revision is checked and the
    change made; refuse a stale one."""
    if revision is None:
        yield
        return
    async with revision_lock("lorebook-entry", tk.owner, ref, uid):
        entry = await _admin(tk).entry(ref, uid)
        check_revision(revision, content_revision(entry), f"entry {uid} of {ref!r}")
        yield


@router.delete("/lorebooks/{ref}/entries/{uid}", status_code=204)
async def delete_lorebook_entry(ref: str, uid: Uid, tk: UserTavern) -> None:
    await _admin(tk).delete_entry(ref, uid)


class EntryLines(BaseModel):
    book: RecordLine
    #: what each line holds, in order: the entry's fields, then its uid (its key in the book)
    fields: list[str]
    #: a line per entry, in the book's order
    entries: list[list[Any]]


@router.get("/lorebooks/{ref}/entries", response_model=EntryLines)
async def lorebook_entry_lines(
    ref: str,
    tk: UserTavern,
    content: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
) -> Response:
    """Every entry's line: its title, keys, switches and numbers, not its content (an editor's
    list of a 20,000-entry book is 2 MB where the book is 36 MB; read an entry whole with
    ``GET .../entries/{uid}``). ``content``: only the entries whose content holds that text,
    in any case."""
    info, lines = await tk.store.lorebook_entry_lines(ref, content_has=content, owner=tk.owner)
    head = EntryLines(
        book=RecordLine.of(info), fields=[*ENTRY_LINE_FIELDS, "uid"], entries=[]
    ).model_dump_json()
    if not head.endswith('"entries":[]}'):  # the field order is the model's: entries last
        raise AssertionError("EntryLines must end with its entries")
    body = head[: -len("[]}")] + lines + "}"
    return Response(body.encode("utf-8"), media_type="application/json")
