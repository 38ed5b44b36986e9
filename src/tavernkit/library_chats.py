"""The library's chat imports (:class:`ChatImports`, a part of
:class:`~tavernkit.library.Library`): a SillyTavern chat file read and written a batch at a
time, named from its content and matched to a stored chat by its lines, the chats imported
before their character attached to it once it comes, and a group chat listed in its group;
with :func:`off_loop`, which parses a big input in a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from tavernkit.chat.greetings import chat_name
from tavernkit.chat_import import ChatSource, streamed_chat, wire_message
from tavernkit.errors import Conflict, FormatError, NameTaken, NotFound, NotStreamable
from tavernkit.formats.chats import is_chat_jsonl
from tavernkit.formats.file_io import FormatLimits
from tavernkit.formats.groups import is_group_chat
from tavernkit.groups.records import attach_chat, group_of_chat, load_group
from tavernkit.library_export import LibraryExports, record_wire
from tavernkit.library_results import ImportResult
from tavernkit.models.chat import Chat
from tavernkit.store.chat_types import ChatInfo

__all__ = [
    "CHAT_BATCH",
    "OFF_LOOP_BYTES",
    "ChatImports",
    "chat_character",
    "chat_lines",
    "chat_name_of",
    "off_loop",
    "same_lines",
    "starts_as_chat",
]

#: messages per write of an imported chat (each a short transaction)
CHAT_BATCH = 500
#: the size of a file from which an import parses it in a worker thread (a chat's messages
#: are converted there from CHAT_BATCH on)
OFF_LOOP_BYTES = 64 * 1024

_R = TypeVar("_R")


class ChatImports(LibraryExports):
    """The chat imports of :class:`~tavernkit.library.Library` (see the module docstring)."""

    limits: FormatLimits

    async def _import_chat_file(
        self, path: Path, source: str, character: str | None, replace: bool
    ) -> ImportResult | None:
        """A ``.jsonl`` chat file read a batch at a time (memory for a batch, not the file);
        ``None`` for one the whole-file reader takes instead: a group chat, or one with a line
        that is not UTF-8 (nothing of it is left stored)."""
        try:
            chat = await streamed_chat(path, source=source, limits=self.limits, batch=CHAT_BATCH)
            if character is None and is_group_chat(chat.view()):
                return None
            stem = Path(source).stem if not source.startswith("<") else None
            return await self._import_chat(chat, stem or "chat", source, character, replace)
        except NotStreamable:
            return None

    async def _import_chat(
        self, chat: ChatSource, name: str, source: str, character: str | None, replace: bool
    ) -> ImportResult:
        """A chat file, named from its content (``<character> - <first message's date>``, as
        SillyTavern names a new chat; the file name for a branch, or when the content says
        nothing). A stored chat with the same lines is this chat (``unchanged``) whatever the
        file is called; a different chat of the same name and character needs ``replace``.
        Only identical content counts as the same: SillyTavern's branches share their main
        chat's ``integrity`` id."""
        view = chat.view()
        header_name, speaker = chat_character(view)
        char_id: str | None = None
        if character is not None:
            char_id = (
                await self.store.get_record("character", character, owner=self.owner)
            ).info.id
        else:
            for candidate in (header_name, speaker):
                if not candidate:
                    continue
                try:
                    record = await self.store.get_record("character", candidate, owner=self.owner)
                except NotFound:
                    continue
                char_id = record.info.id
                break
        # A branch shares its main chat's first message (and, in SillyTavern, its integrity
        # id): only its file name tells it apart.
        if not chat.header.chat_metadata.main_chat:
            name = chat_name_of(view, header_name or speaker) or name
        integrity = chat.header.chat_metadata.integrity
        # the stored chats with the file's integrity id, by the store's index (never by
        # loading every chat); a chat is only loaded to compare when its length can be the file's
        same_id = (
            {i.id for i in await self.store.chats_with_integrity(integrity, owner=self.owner)}
            if integrity
            else set()
        )
        same_name: ChatInfo | None = None
        for info in await self.store.list_chats(owner=self.owner):
            named = info.name == name and info.character_id == char_id
            # imported before its character was: the same chat, to attach now
            orphan = info.name == name and info.character_id is None and char_id is not None
            if named:
                same_name = info
            if not (named or orphan or info.id in same_id):
                continue
            if chat.count is not None and info.message_count != chat.count:
                continue
            stored = await self.store.load_chat(info.id, owner=self.owner)
            if await same_lines(stored.lines(), chat):
                if char_id is not None and info.character_id is None:
                    await self.store.attach_chat(info.id, char_id, owner=self.owner)
                    return ImportResult("chat", info.name, info.id, "linked", source)
                return ImportResult("chat", info.name, info.id, "unchanged", source)
        if same_name is not None:
            if not replace:
                raise NameTaken(
                    f"a chat named {name!r} already exists and differs from {source}",
                    kind="chat",
                    name=name,
                )
            # the new chat first: a file that turns out bad part way leaves the old one be
            created = await self._write_chat(chat, name, char_id)
            await self.store.delete_chat(same_name.id, owner=self.owner)
            return ImportResult("chat", name, created.id, "replaced", source)
        created = await self._write_chat(chat, name, char_id)
        return ImportResult("chat", name, created.id, "imported", source)

    async def _write_chat(self, chat: ChatSource, name: str, char_id: str | None) -> ChatInfo:
        """The chat written a batch at a time (:data:`CHAT_BATCH` messages, each a short
        write): a 20,000-message chat never holds the loop, or the store, for the whole of it.
        One that fails part way is removed."""
        created: ChatInfo | None = None
        try:
            async for batch in chat.batches():
                if created is None:
                    created = await self._create_chat([chat.head_line(), *batch], name, char_id)
                else:
                    await self.store.append_messages(
                        created.id, batch, owner=self.owner, detached=True
                    )
        except BaseException:
            if created is not None:
                await asyncio.shield(self.store.delete_chat(created.id, owner=self.owner))
            raise
        if created is None:
            return await self._create_chat([chat.head_line()], name, char_id)
        return await self.store.get_chat_info(created.id, owner=self.owner)

    async def _adopt_chats(self, name: str, char_id: str, source: str) -> list[ImportResult]:
        """Attach to the character ``name`` (just imported) the chats imported before it that
        name it as their character (not group chats: those belong to their group)."""
        adopted: list[ImportResult] = []
        for info in await self.store.list_chats(owner=self.owner):
            if info.character_id is not None:
                continue
            # its header and first messages say whose it is (not the whole chat: cheap)
            window = await self.store.load_chat_window(info.id, last=1, owner=self.owner)
            try:
                chat = window.to_chat()
            except FormatError:
                continue  # a chat edited out of shape says nothing reliable of its character
            if is_group_chat(chat) or name not in chat_character(chat):
                continue
            if await group_of_chat(self.store, info.name, owner=self.owner) is not None:
                continue
            if await self.store.attach_chat(info.id, char_id, owner=self.owner):
                note = f"attached to {name}"
                adopted.append(ImportResult("chat", info.name, info.id, "linked", source, note))
        return adopted

    async def _import_group_chat(
        self, chat: Chat, name: str, source: str, group: str | None
    ) -> ImportResult:
        """A group chat, named after its file (SillyTavern's chat id), attached to no
        character and listed in its group: ``group``, else the stored group that lists the
        name. The same lines under that name are this chat (``unchanged``)."""
        lines = await off_loop(len(chat.messages) >= CHAT_BATCH, chat_lines, chat)
        owner = self.owner
        if group is None:
            found = await group_of_chat(self.store, name, owner=owner)
            group = found.id if found is not None else None
        else:
            group = (await load_group(self.store, group, owner=owner)).id
        for info in await self.store.list_chats(owner=owner):
            if info.name == name and info.character_id is None:
                stored = await self.store.load_chat(info.id, owner=owner)
                if stored.lines() != lines:
                    raise Conflict(
                        f"a chat named {name!r} already exists and differs from {source}"
                    )
                return ImportResult("chat", name, info.id, "unchanged", source)
        created = await self._create_chat(lines, name, None)
        if group is not None:
            await attach_chat(self.store, group, name, owner=owner)
        return ImportResult("chat", name, created.id, "imported", source)

    async def _create_chat(
        self, lines: list[dict[str, Any]], name: str, char_id: str | None
    ) -> ChatInfo:
        return await self.store.create_chat(
            lines[0], lines[1:], owner=self.owner, name=name, character=char_id
        )


def chat_character(chat: Chat) -> tuple[str | None, str | None]:
    """Who a chat file says its character is: the header's ``character_name`` (SillyTavern
    writes ``"unused"`` there now) and the first speaker who is not the user."""
    speaker = next((m.name for m in chat.messages if not m.is_user and m.name), None)
    header_name = chat.header.character_name
    if header_name in (None, "", "unused"):
        header_name = None
    return header_name, speaker


def chat_name_of(chat: Chat, character: str | None) -> str | None:
    """SillyTavern's name for the chat when it began (``<character> - <date>``), from the
    first message's ISO date; ``None`` when either is unknown."""
    if not character or not chat.messages:
        return None
    raw = chat.messages[0].send_date
    if not isinstance(raw, str):
        return None
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return chat_name(character, when)


def starts_as_chat(path: Path) -> bool:
    """Whether the file's first line reads as a chat's header (only that line is read)."""
    with path.open("rb") as file:
        return is_chat_jsonl(file.readline(1024 * 1024))


async def same_lines(stored: list[dict[str, Any]], chat: ChatSource) -> bool:
    """Whether a stored chat's lines are the file's, read a batch at a time."""
    if not stored or stored[0] != chat.head_line():
        return False
    at = 1
    async for batch in chat.batches():
        if stored[at : at + len(batch)] != batch:
            return False
        at += len(batch)
    return at == len(stored)


def chat_lines(chat: Chat) -> list[dict[str, Any]]:
    """The chat as the lines of its ``.jsonl``: the header, then each message."""
    return [record_wire(chat.header), *(wire_message(m) for m in chat.messages)]


async def off_loop(big: bool, fn: Callable[..., _R], *args: Any, **kw: Any) -> _R:
    """``fn(*args, **kw)`` in a worker thread when its input is ``big`` (a file's bytes, a
    chat's messages: parsing and converting them would hold the event loop, and every other
    user's request, for seconds), else here (a thread's trip costs more than a small file)."""
    if not big:
        return fn(*args, **kw)
    return await asyncio.to_thread(fn, *args, **kw)
