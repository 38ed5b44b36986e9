"""Searching the text of the caller's messages, across their chats or inside one
(:meth:`~tavernkit.store.protocol.Store.search_messages`). A hit names its chat and the
message's index there, so a client opens ``/chats/{chat_id}/messages/{index}`` (or the chat's
page around it) at the message."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator

from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import Page, PageQuery
from tavernkit.store.chat_types import MessageHit

__all__ = ["router"]

router = APIRouter(prefix="/search", tags=["search"])


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("q, the text to search for, is empty")
    return text


#: the search text: words the message must all hold, ``"a phrase"`` as one
SearchText = Annotated[
    str,
    Query(
        min_length=1,
        max_length=500,
        description=(
            'words the message must all contain (any case); "a phrase" in double quotes is '
            "one; no operators"
        ),
    ),
    AfterValidator(_not_blank),
]


@router.get("/messages")
async def search_messages(
    q: SearchText,
    tk: UserTavern,
    paging: PageQuery,
    chat: Annotated[str | None, Query(description="only this chat's (id or name)")] = None,
    character: Annotated[
        str | None, Query(description="only this character's chats (id or name)")
    ] = None,
) -> Page[MessageHit]:
    """The caller's messages whose shown text holds every word of ``q``, newest first: the
    most recently updated chat's first, and in a chat the last message first."""
    found = await tk.store.search_messages(
        q,
        owner=tk.owner,
        chat=chat,
        character=character,
        limit=paging.limit,
        offset=paging.offset,
    )
    return Page(
        items=list(found.hits),  # the store's dataclass is the wire shape
        total=found.total,
        offset=paging.offset,
        limit=paging.limit,
    )
