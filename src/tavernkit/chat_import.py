"""A chat file's content as an import reads it: its header, its first messages (what names it
and tells a group chat) and its message lines in batches, read again from the start for each
pass (a comparison with a stored chat, then the write).

Two sources: a chat already parsed (:func:`parsed_chat`, what a file in memory gives) and a
``.jsonl`` file read a batch at a time (:func:`streamed_chat`): the import of a 60 MB chat
then holds a batch of its lines, never the file, and each batch is parsed and converted in a
worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tavernkit.formats.chats import iter_chat_file
from tavernkit.formats.file_io import FormatLimits
from tavernkit.library_export import record_wire
from tavernkit.models.chat import Chat, ChatHeader, Message

__all__ = ["ChatSource", "parsed_chat", "streamed_chat", "wire_message"]

Lines = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ChatSource:
    header: ChatHeader
    #: the first batch's messages (at most ``batch``)
    first: list[Message]
    #: how many messages it has, when known before a pass (a parsed chat)
    count: int | None
    #: the message lines (as the ``.jsonl`` has them) in batches, from the first
    batches: Callable[[], AsyncIterator[Lines]]

    def head_line(self) -> dict[str, Any]:
        return record_wire(self.header)

    def view(self) -> Chat:
        """The header and first messages as a chat (to name it, to tell a group chat)."""
        return Chat(header=self.header, messages=self.first)


def wire_message(message: Any) -> dict[str, Any]:
    to_st = getattr(message, "to_st", None)
    if callable(to_st):
        return record_wire(to_st())
    return record_wire(message)


def _wire(messages: list[Message]) -> Lines:
    return [wire_message(m) for m in messages]


def parsed_chat(chat: Chat, batch: int) -> ChatSource:
    """A parsed chat's lines (each batch converted in a worker thread when it is a full one)."""
    messages = chat.messages

    async def batches() -> AsyncIterator[Lines]:
        for start in range(0, len(messages), batch):
            part = messages[start : start + batch]
            yield await asyncio.to_thread(_wire, part) if len(part) >= batch else _wire(part)

    return ChatSource(chat.header, messages[:batch], len(messages), batches)


async def streamed_chat(path: Path, *, source: str, limits: FormatLimits, batch: int) -> ChatSource:
    """The ``.jsonl`` chat at ``path`` read a batch at a time, each batch read, parsed and
    converted in a worker thread. Raises what :func:`~tavernkit.formats.chats.iter_chat_file`
    raises (:class:`~tavernkit.formats.chats.NotStreamable` for a line that is not UTF-8),
    when reading the header and first batch here and on any later pass."""

    def open_lines() -> tuple[Any, Iterator[ChatHeader | list[Message]]]:
        file = path.open("rb")
        return file, iter_chat_file(file, source=source, limits=limits, batch=batch)

    def step(lines: Iterator[ChatHeader | list[Message]]) -> ChatHeader | list[Message] | None:
        return next(lines, None)

    file, lines = await asyncio.to_thread(open_lines)
    try:
        header = await asyncio.to_thread(step, lines)
        first = await asyncio.to_thread(step, lines)
    finally:
        file.close()
    if not isinstance(header, ChatHeader):
        raise AssertionError("iter_chat_file yields the header first")

    def step_wire(lines: Iterator[ChatHeader | list[Message]]) -> Lines | None:
        found = next(lines, None)
        while isinstance(found, ChatHeader):
            found = next(lines, None)
        return None if found is None else _wire(found)

    async def batches() -> AsyncIterator[Lines]:
        file, lines = await asyncio.to_thread(open_lines)
        try:
            while (part := await asyncio.to_thread(step_wire, lines)) is not None:
                yield part
        finally:
            file.close()

    return ChatSource(header, first if isinstance(first, list) else [], None, batches)
