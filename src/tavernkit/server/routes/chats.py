"""Chats and their messages. A chat is never uploaded whole: creating one writes its header
and greeting, and each change afterwards is one message (or one swipe) — append, edit, delete,
pick or drop a swipe — or a new chat (a branch). Messages are listed newest first, a page at a
time, read from the end of the chat (a page costs what it holds, not the chat's length).
Chat-local variables (``chat_metadata.variables``) are one small header write each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, Field

from tavernkit.chat.display import Shown, shown_messages
from tavernkit.chat.incomplete import incomplete_reply
from tavernkit.chat.prepare import turn_tokenizer
from tavernkit.errors import NotFound
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import (
    IfMatch,
    Page,
    PageQuery,
    State,
    VariableValue,
    page_of,
    tag_revision,
)
from tavernkit.store.chat_types import ChatInfo, StoredMessage
from tavernkit.store.revisions import message_revision
from tavernkit.text.tokens import Tokenizer

__all__ = ["router"]

router = APIRouter(prefix="/chats", tags=["chats"])


class ChatLine(BaseModel):
    id: str
    name: str
    character_id: str | None
    character_name: str | None
    message_count: int
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, info: ChatInfo) -> ChatLine:
        return cls(
            id=info.id,
            name=info.name,
            character_id=info.character_id,
            character_name=info.character_name,
            message_count=info.message_count,
            created=info.created,
            updated=info.updated,
        )


class ChatBody(ChatLine):
    #: the header line (``chat_metadata`` and the rest), as SillyTavern writes it
    header: dict[str, Any]
    #: the character's thumbnail (changes with the character); ``None`` when it has no
    #: avatar (a JSON card) or the chat is a group's, so a browser asks for no missing image
    character_thumbnail_url: str | None = None


class MessageBody(BaseModel):
    id: str
    index: int
    #: the message as SillyTavern's JSON (``mes``, ``swipes``, ``swipe_id``, ``extra``...)
    data: dict[str, Any]
    #: swipe indexes a failed or interrupted turn left unfinished
    partial_swipes: list[int]
    #: why the shown swipe is unfinished, for a display ("stopped before the end",
    #: "incomplete (interrupted)"...); ``None`` when it is complete
    incomplete: str | None = None
    #: the shown text's tokens by the active connection's tokenizer (``?tokens=true``)
    tokens: int | None = None
    #: what the chat shows instead of the stored text, when display-only regex scripts
    #: change it (``None``: the stored text); ``display_reasoning`` the same for reasoning
    display: str | None = None
    display_reasoning: str | None = None
    #: changes whenever anything stored about the message changes; send it back with an
    #: edit as ``If-Match`` to have a stale edit refused instead of overwriting
    revision: str = ""

    @classmethod
    def of(cls, m: StoredMessage, shown: Shown | None = None) -> MessageBody:
        unfinished = incomplete_reply(m) if m.partial_swipes else None
        return cls(
            id=m.id,
            index=m.position,
            data=m.data,
            partial_swipes=list(m.partial_swipes),
            incomplete=unfinished.text() if unfinished is not None else None,
            display=shown.text if shown is not None else None,
            display_reasoning=shown.reasoning if shown is not None else None,
            revision=message_revision(m),
        )


async def _bodies(tk: UserTavern, chat_id: str, rows: Sequence[StoredMessage]) -> list[MessageBody]:
    """The messages' bodies with what each shows (display-only regex scripts)."""
    shown = await shown_messages(tk.store, chat_id, rows, owner=tk.owner)
    return [MessageBody.of(m, shown.get(m.position)) for m in rows]


async def _body(tk: UserTavern, chat_id: str, index: int) -> MessageBody:
    return (await _bodies(tk, chat_id, [await _message(tk, chat_id, index)]))[0]


class NewChat(BaseModel):
    character: str = Field(min_length=1, description="the character's id or name")
    name: str | None = Field(default=None, min_length=1, max_length=500)
    persona: str | None = None


class ChatPatch(BaseModel):
    name: str = Field(min_length=1, max_length=500)


class NewMessage(BaseModel):
    name: str = Field(min_length=1, max_length=500)
    text: str = Field(max_length=1_000_000)
    is_user: bool = True
    is_system: bool = False


class MessageEdit(BaseModel):
    text: str = Field(max_length=1_000_000)
    reasoning: str | None = Field(default=None, max_length=1_000_000)


class Hidden(BaseModel):
    #: true: left out of every prompt (``is_system``); false: in them again
    hidden: bool


class SwipeChoice(BaseModel):
    swipe: int = Field(ge=0)


class BranchRequest(BaseModel):
    #: the last message the branch keeps (default: all of them)
    message_index: int | None = Field(default=None, ge=0)


MessageIndex = Annotated[int, Path(ge=0)]


@router.get("")
async def list_chats(
    tk: UserTavern,
    paging: PageQuery,
    character: Annotated[str | None, Query(description="only this character's")] = None,
) -> Page[ChatLine]:
    """Chats, most recently updated first."""
    items, total = page_of(await tk.store.list_chats(owner=tk.owner, character=character), paging)
    return Page(
        items=[ChatLine.of(c) for c in items],
        total=total,
        offset=paging.offset,
        limit=paging.limit,
    )


@router.post("", status_code=201)
async def create_chat(body: NewChat, tk: UserTavern) -> ChatLine:
    """A new chat with a character, its greetings as the first message's swipes."""
    return ChatLine.of(
        await tk.chats.new_chat(body.character, name=body.name, persona=body.persona)
    )


@router.get("/{chat_id}")
async def get_chat(chat_id: str, tk: UserTavern, state: State) -> ChatBody:
    """The chat's listing line and header (not its messages: see ``/messages``), and its
    character's thumbnail URL where it has an avatar."""
    window = await tk.store.load_chat_window(chat_id, last=1, owner=tk.owner)
    return ChatBody(
        **ChatLine.of(window.info).model_dump(),
        header=window.header,
        character_thumbnail_url=await _thumbnail_url(tk, state, window.info.character_id),
    )


async def _thumbnail_url(tk: UserTavern, state: State, character_id: str | None) -> str | None:
    if not character_id:
        return None
    try:
        stored = await tk.store.get_record("character", character_id, owner=tk.owner)
    except NotFound:  # the character was deleted; its chats stay
        return None
    if not await state.avatars.has(tk.store, stored.info, owner=tk.owner):
        return None
    version = int(stored.info.updated.timestamp() * 1_000_000)
    return f"/characters/{stored.info.id}/thumbnail?v={version}"


@router.patch("/{chat_id}")
async def rename_chat(chat_id: str, body: ChatPatch, tk: UserTavern) -> ChatLine:
    await tk.store.rename_chat(chat_id, body.name, owner=tk.owner)
    return ChatLine.of(await tk.store.get_chat_info(chat_id, owner=tk.owner))


@router.delete("/{chat_id}", status_code=204)
async def delete_chat(chat_id: str, tk: UserTavern) -> None:
    await tk.store.delete_chat(chat_id, owner=tk.owner)


@router.post("/{chat_id}/branch", status_code=201)
async def branch_chat(chat_id: str, body: BranchRequest, tk: UserTavern) -> ChatLine:
    """A new chat holding the messages up to ``message_index``, naming this one as its
    ``main_chat`` (SillyTavern's branches)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    return ChatLine.of(await tk.chats.branch(info.id, body.message_index))


# -- messages ---------------------------------------------------------------------------------


@router.get("/{chat_id}/messages")
async def list_messages(
    chat_id: str,
    tk: UserTavern,
    paging: PageQuery,
    before: Annotated[
        int | None,
        Query(ge=0, description="only messages before this index (a page further back)"),
    ] = None,
    tokens: Annotated[
        bool, Query(description="count each message's tokens as the next turn would")
    ] = False,
) -> Page[MessageBody]:
    """The chat's messages, newest first: ``offset=0`` is the last message, or with ``before``
    the one before that index. A page costs the same wherever it is in the chat."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    end = info.message_count if before is None else min(before, info.message_count)
    stop = max(end - paging.offset, 0)
    start = max(stop - paging.limit, 0)
    rows = await tk.store.load_message_range(info.id, start=start, stop=stop, owner=tk.owner)
    items = await _bodies(tk, info.id, list(reversed(rows)))
    if tokens and items:
        counter = await _active_tokenizer(tk)
        for item in items:
            item.tokens = counter.count(Message.model_validate(item.data).text)
    return Page(
        items=items,
        total=info.message_count,
        offset=paging.offset,
        limit=paging.limit,
    )


async def _active_tokenizer(tk: Tavern) -> Tokenizer:
    """The tokenizer the next turn on the active connection counts with (SillyTavern's
    message token counter)."""
    connection = await tk.context().connection_profiles.resolve("")
    return turn_tokenizer(connection, await tk.settings())


async def _message(tk: UserTavern, chat_id: str, index: int) -> StoredMessage:
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    if not 0 <= index < info.message_count:
        raise NotFound(f"no message {index} in chat {info.name!r}")
    rows = await tk.store.load_message_range(info.id, start=index, stop=index + 1, owner=tk.owner)
    return rows[0]


@router.post("/{chat_id}/messages", status_code=201)
async def append_message(chat_id: str, body: NewMessage, tk: UserTavern) -> MessageBody:
    """Append one message as written (no reply is generated: that is a turn)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    message = Message.new(body.name, body.text, is_user=body.is_user, is_system=body.is_system)
    if not body.is_user:
        message.ensure_swipes()
    stored = await tk.store.append_message(info.id, message, owner=tk.owner)
    return (await _bodies(tk, info.id, [stored]))[0]


@router.get("/{chat_id}/messages/{index}")
async def get_message(
    chat_id: str, index: MessageIndex, tk: UserTavern, response: Response
) -> MessageBody:
    """Message ``index`` (0 is the first) of the chat; its revision also as the ``ETag``."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    body = await _body(tk, info.id, index)
    tag_revision(response, body.revision)
    return body


@router.patch("/{chat_id}/messages/{index}")
async def edit_message(
    chat_id: str, index: MessageIndex, body: MessageEdit, tk: UserTavern, revision: IfMatch
) -> MessageBody:
    """Replace one message's text (its shown swipe too) and, if given, its reasoning. With
    ``If-Match: <revision>``, a message changed since it was read is left as it is (409
    ``StaleRevision`` with the current revision and text)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    await tk.chats.edit(info.id, index, body.text, reasoning=body.reasoning, revision=revision)
    return await _body(tk, info.id, index)


@router.delete("/{chat_id}/messages/{index}", status_code=204)
async def delete_message(
    chat_id: str, index: MessageIndex, tk: UserTavern, revision: IfMatch
) -> None:
    """Delete one message; the later ones move up. With ``If-Match: <revision>``, a message
    changed (or moved into that index) since it was read is kept (409 ``StaleRevision``)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    await tk.chats.delete(info.id, index, revision=revision)


@router.delete("/{chat_id}/messages/from/{index}", status_code=204)
async def delete_messages_from(
    chat_id: str, index: MessageIndex, tk: UserTavern, revision: IfMatch
) -> None:
    """Delete message ``index`` and every later one (SillyTavern's delete mode). With
    ``If-Match: <revision>`` (message ``index``'s), a chat changed there since it was read
    keeps its messages (409 ``StaleRevision``)."""
    await tk.chats.delete_from(chat_id, index, revision=revision)


@router.put("/{chat_id}/messages/{index}/hidden")
async def hide_message(
    chat_id: str, index: MessageIndex, body: Hidden, tk: UserTavern, revision: IfMatch
) -> MessageBody:
    """Hide the message from the prompts (it stays in the chat: SillyTavern's ghost) or show
    it again. With ``If-Match: <revision>``, a message changed since it was read is left as
    it is (409 ``StaleRevision``)."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    await tk.chats.set_hidden(info.id, index, body.hidden, revision=revision)
    return await _body(tk, info.id, index)


@router.put("/{chat_id}/messages/{index}/swipe")
async def select_swipe(
    chat_id: str, index: MessageIndex, body: SwipeChoice, tk: UserTavern, revision: IfMatch
) -> MessageBody:
    """Show swipe ``swipe`` of the message (swiping back and forth). With ``If-Match``, as
    for hiding."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    await tk.chats.select_swipe(info.id, body.swipe, message_index=index, revision=revision)
    return await _body(tk, info.id, index)


@router.delete("/{chat_id}/messages/{index}/swipes/{swipe}", status_code=204)
async def delete_swipe(
    chat_id: str,
    index: MessageIndex,
    swipe: Annotated[int, Path(ge=0)],
    tk: UserTavern,
    revision: IfMatch,
) -> None:
    """Delete one swipe of the message. With ``If-Match: <revision>``, a message whose
    swipes changed since it was read keeps them all (409 ``StaleRevision``): the index
    named may be another swipe now."""
    info = await tk.store.get_chat_info(chat_id, owner=tk.owner)
    await tk.chats.delete_swipe(info.id, index, swipe, revision=revision)


# -- chat variables ---------------------------------------------------------------------------


async def _metadata(tk: UserTavern, chat_id: str) -> tuple[str, dict[str, Any]]:
    window = await tk.store.load_chat_window(chat_id, last=1, owner=tk.owner)
    return window.info.id, dict(window.header.get("chat_metadata") or {})


@router.get("/{chat_id}/variables")
async def get_chat_variables(chat_id: str, tk: UserTavern) -> dict[str, Any]:
    _, metadata = await _metadata(tk, chat_id)
    variables = metadata.get("variables")
    return dict(variables) if isinstance(variables, dict) else {}


@router.put("/{chat_id}/variables/{name}")
async def set_chat_variable(
    chat_id: str, name: str, body: VariableValue, tk: UserTavern
) -> dict[str, Any]:
    cid, metadata = await _metadata(tk, chat_id)
    variables = dict(metadata.get("variables") or {})
    variables[name] = body.value
    metadata["variables"] = variables
    await tk.store.update_chat_metadata(cid, metadata, owner=tk.owner)
    return variables


@router.delete("/{chat_id}/variables/{name}", status_code=204)
async def delete_chat_variable(chat_id: str, name: str, tk: UserTavern) -> None:
    cid, metadata = await _metadata(tk, chat_id)
    variables = dict(metadata.get("variables") or {})
    if name not in variables:
        raise NotFound(f"no chat variable {name!r}")
    del variables[name]
    metadata["variables"] = variables
    await tk.store.update_chat_metadata(cid, metadata, owner=tk.owner)
