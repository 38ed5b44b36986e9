"""What the resource routes share: paging, the stored-record body, the dependencies."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Depends, Header, Query, Request, Response
from pydantic import BaseModel, Field

from tavernkit.facade import Tavern
from tavernkit.server.auth import current_principal
from tavernkit.server.principal import Principal
from tavernkit.server.state import ServerState, server_state, state_of
from tavernkit.store.record_types import RecordInfo, StoredRecord
from tavernkit.store.revisions import content_revision

__all__ = [
    "Duplicate",
    "IfMatch",
    "ModelCall",
    "Page",
    "PageQuery",
    "Paging",
    "RecordBody",
    "RecordLine",
    "Rename",
    "State",
    "VariableValue",
    "check_egress",
    "page_of",
    "record_revision",
]

State = Annotated[ServerState, Depends(server_state)]


class Rename(BaseModel):
    """The body of a rename: the record's new name."""

    name: str = Field(min_length=1, max_length=500)


class Duplicate(BaseModel):
    """The body of a copy: its name (default ``"<name> (copy)"``, numbered when taken)."""

    name: str | None = Field(default=None, min_length=1, max_length=500)


class VariableValue(BaseModel):
    """The body of a variable's write (a global or a chat variable)."""

    value: Any


async def if_match(
    if_match: Annotated[str | None, Header(max_length=200)] = None,
) -> str | None:
    """The revision an ``If-Match`` header names (``"abc"``, ``W/"abc"`` or bare ``abc``);
    ``None`` for no header or ``*``: the change is then made without a check. (A coroutine:
    FastAPI runs a plain dependency in its thread pool.)"""
    if if_match is None:
        return None
    value = if_match.strip().removeprefix("W/").strip().strip('"')
    return None if value in ("", "*") else value


#: the revision a change was made against (``If-Match``), or ``None``: no check
IfMatch = Annotated[str | None, Depends(if_match)]


def record_revision(info: RecordInfo, data: dict[str, Any]) -> str:
    """A record's revision as the API shows it: changes with its name or JSON."""
    return content_revision(info.id, info.name, data)


async def model_call(request: Request) -> Principal:
    """The caller, with this request counted against their ``turn_rate`` (429 past it)."""
    principal = await current_principal(request)
    await state_of(request).admit_turn(principal)
    return principal


#: the caller of a route that can make the server call a model (a turn, a task, a profile's
#: test, a summary) or an MCP server, counted once at admission, before the route's own
#: checks: a request that then fails has counted too
ModelCall = Annotated[Principal, Depends(model_call)]

_T = TypeVar("_T")


class Paging(BaseModel):
    offset: int
    limit: int


async def _paging(
    state: State,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> Paging:
    cap = state.settings.page_max
    return Paging(offset=offset, limit=min(limit or cap, cap))


#: ``?offset=&limit=`` (limit capped at the server's ``page_max``)
PageQuery = Annotated[Paging, Depends(_paging)]


class Page(BaseModel, Generic[_T]):
    items: list[_T]
    total: int
    offset: int
    limit: int


def page_of(items: Sequence[_T], paging: Paging) -> tuple[list[_T], int]:
    """The page of ``items`` ``paging`` asks for, and the total."""
    return list(items[paging.offset : paging.offset + paging.limit]), len(items)


class RecordLine(BaseModel):
    id: str
    name: str
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, info: RecordInfo) -> RecordLine:
        return cls(id=info.id, name=info.name, created=info.created, updated=info.updated)


class RecordBody(RecordLine):
    kind: str
    #: changes whenever the record's name or JSON does; send it as ``If-Match`` with a change
    #: to have a stale one refused (409 ``StaleRevision``). Empty where the JSON is passed
    #: through unread (a whole lorebook: its entries carry their own).
    revision: str = ""
    #: the record's JSON as SillyTavern writes it
    data: dict[str, Any]

    @classmethod
    def of_record(cls, stored: StoredRecord) -> RecordBody:
        info = stored.info
        return cls(
            id=info.id,
            name=info.name,
            created=info.created,
            updated=info.updated,
            kind=info.kind,
            revision=record_revision(info, stored.data),
            data=stored.data,
        )


def record_body_json(info: RecordInfo, text: str, revision: str = "") -> Response:
    """:class:`RecordBody`'s JSON with the record's stored JSON ``text`` spliced in as it is:
    a 28 MB lorebook goes out without being parsed and encoded again on the event loop.
    ``revision``: the record's, where the caller read it (empty for a lorebook)."""
    head = RecordBody(
        id=info.id,
        name=info.name,
        created=info.created,
        updated=info.updated,
        kind=info.kind,
        revision=revision,
        data={},
    ).model_dump_json()
    if not head.endswith('"data":{}}'):  # the field order is the model's: data last
        raise AssertionError("RecordBody must end with its data")
    body = head[: -len("{}}")] + text + "}"
    response = Response(body.encode("utf-8"), media_type="application/json")
    tag_revision(response, revision)
    return response


def tag_revision(response: Response, revision: str) -> None:
    """The revision as the response's ``ETag`` too (what ``If-Match`` sends back), for HTTP
    clients that keep one the standard way; none where the thing has none (a lorebook)."""
    if revision:
        response.headers["ETag"] = f'"{revision}"'


async def check_egress(tk: Tavern, url: object, *, field: str) -> None:
    """Refuse ``url`` as a record is saved when the caller's egress policy would refuse its
    requests (:class:`~tavernkit.errors.EgressRefused` naming ``field``; a non-admin's with
    accounts on); nothing for anyone else or for a value that is not a URL."""
    policy = tk.runtime.egress
    if policy is not None and isinstance(url, str) and url.strip():
        await policy.check_url(url, field=field)
