"""Lorebooks, presets, templates, personas, quick replies and custom endpoints: document
records of one kind each, listed (paged), read, created, replaced and deleted as JSON.

Each change is one record's row. Every call is the principal's owner's: another owner's
record is 404, as a missing one is. A custom endpoint's ``base_url`` must be one the caller's
egress policy allows (:mod:`tavernkit.egress`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from tavernkit.lorebook_admin import LorebookAdmin
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import (
    IfMatch,
    Page,
    PageQuery,
    RecordBody,
    RecordLine,
    check_egress,
    page_of,
    record_body_json,
    record_revision,
)
from tavernkit.store.revisions import check_revision, revision_lock

__all__ = ["DOCUMENT_PATHS", "router"]

#: URL path -> store kind
DOCUMENT_PATHS: dict[str, str] = {
    "lorebooks": "lorebook",
    "personas": "persona",
    "presets/chat": "chat_preset",
    "presets/textgen": "textgen_preset",
    "presets/kobold": "kobold_preset",
    "presets/novel": "novel_preset",
    "templates/instruct": "instruct",
    "templates/context": "context",
    "templates/sysprompt": "sysprompt",
    "templates/reasoning": "reasoning",
    "quick-replies": "quick_reply_set",
    "endpoints": "custom_endpoint",
}

router = APIRouter()

#: the kind whose records hold a URL the server sends to (the egress policy checks it)
_ENDPOINT = "custom_endpoint"

JsonObject = Annotated[dict[str, Any], Body(description="the record's JSON")]


def _add_routes(path: str, kind: str) -> None:
    tag = path.split("/")[0]
    op = kind

    @router.get(f"/{path}", tags=[tag], operation_id=f"list_{op}")
    async def list_records(tk: UserTavern, paging: PageQuery) -> Page[RecordLine]:
        items, total = page_of(await tk.store.list(kind, owner=tk.owner), paging)
        return Page(
            items=[RecordLine.of(i) for i in items],
            total=total,
            offset=paging.offset,
            limit=paging.limit,
        )

    @router.get(f"/{path}/{{ref}}", tags=[tag], operation_id=f"get_{op}", response_model=RecordBody)
    async def get_record(ref: str, tk: UserTavern) -> Response:
        """The record with id (or name) ``ref`` (its JSON sent as stored, not parsed again).
        Its ``revision`` too, except a lorebook's (its entries carry their own)."""
        info, text = await tk.store.get_record_text(kind, ref, owner=tk.owner)
        if kind == "lorebook":  # a big book is not parsed on the loop for a revision
            return record_body_json(info, text)
        return record_body_json(info, text, record_revision(info, json.loads(text)))

    @router.post(f"/{path}", tags=[tag], operation_id=f"create_{op}", status_code=201)
    async def create_record(body: JsonObject, tk: UserTavern) -> RecordBody:
        """A new record from its JSON (422 naming the field when it does not validate, 409
        when its name is taken)."""
        if kind == _ENDPOINT:
            await check_egress(tk, body.get("base_url"), field="base_url")
        ref = await tk.store.put(kind, body, owner=tk.owner)
        return RecordBody.of_record(await tk.store.get_record(kind, ref.id, owner=tk.owner))

    @router.put(f"/{path}/{{ref}}", tags=[tag], operation_id=f"replace_{op}")
    async def replace_record(
        ref: str, body: JsonObject, tk: UserTavern, revision: IfMatch
    ) -> RecordBody:
        """Replace the record's JSON; it keeps its id (and so its links). With
        ``If-Match: <revision>``, a record changed since it was read is left as it is (409
        ``StaleRevision``)."""
        if revision is None:
            return await _replace(ref, body, tk)
        key = (await tk.store.get_record(kind, ref, owner=tk.owner)).info.id
        async with revision_lock("record", tk.owner, kind, key):
            stored = await tk.store.get_record(kind, key, owner=tk.owner)
            current = record_revision(stored.info, stored.data)
            check_revision(revision, current, f"the {kind} {stored.info.name!r}")
            return await _replace(key, body, tk)

    async def _replace(ref: str, body: dict[str, Any], tk: UserTavern) -> RecordBody:
        stored = await tk.store.get_record(kind, ref, owner=tk.owner)
        if kind == _ENDPOINT:
            await check_egress(tk, body.get("base_url"), field="base_url")
        done = await tk.store.put(kind, body, owner=tk.owner, id=stored.info.id)
        return RecordBody.of_record(await tk.store.get_record(kind, done.id, owner=tk.owner))

    @router.delete(f"/{path}/{{ref}}", tags=[tag], operation_id=f"delete_{op}", status_code=204)
    async def delete_record(ref: str, tk: UserTavern) -> None:
        if kind == "lorebook":  # and the bindings that name it (tavernkit.lorebook_admin)
            await LorebookAdmin(tk.store, tk.owner).delete(ref)
            return
        await tk.store.delete(kind, ref, owner=tk.owner)


for _path, _kind in DOCUMENT_PATHS.items():
    _add_routes(_path, _kind)
