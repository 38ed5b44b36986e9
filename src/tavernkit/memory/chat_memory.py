"""Chat memory: older messages brought back by similarity (reference §2.4-2.5).

Indexing (:func:`chat_items`, then ``VectorCollections.sync``): every message that is not a
system message (all of them with ``keep_hidden``), its text with macros resolved, its hash
cyrb53 of that text, cut into chunks of ``message_chunk_size`` that share the hash and carry
the chat index.

Retrieval (:func:`recall`) runs on the prompt's chat before the world-info scan, so the scan
sees the rearranged history: nothing happens unless the chat has at least ``protect``
messages; the query text is the last ``query`` messages, newest first; the ``insert`` best
items give their hashes; the messages outside the last ``protect`` whose hash is among them
are moved out of the history and into the ``3_vectors`` extension prompt, ``Name: text``
each, best match last, joined by a blank line, in ``template`` (``{{text}}``), at
``position``/``depth`` as system.

Compat ``st-1.18`` keeps SillyTavern's quirks: ``score_threshold`` has no effect on chat
retrieval; removing a message skips the one after it (so of two adjacent hits the second
stays in the history *and* is injected); ``protect`` 0 retains the whole chat. The default
mode applies the threshold, removes every hit and retains nothing for ``protect`` 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tavernkit.memory.collections import Item, VectorCollections
from tavernkit.memory.text import (
    chunk_delimiters,
    collapse_newlines,
    message_hash,
    query_text,
    split_recursive,
)
from tavernkit.models.chat import Message
from tavernkit.models.memory import VectorSettings
from tavernkit.prompt.state import ExtensionPrompt

__all__ = ["VECTORS_KEY", "Recall", "chat_items", "chat_texts", "recall", "sync_chat"]

#: SillyTavern's extension prompt key of chat memory
VECTORS_KEY = "3_vectors"


def _resolved(text: str, substitute: Callable[[str], str]) -> str:
    # a text without a macro resolves to itself: skip the evaluator on the hot path
    return substitute(text) if "{" in text else text


def chat_texts(
    messages: Sequence[Message], settings: VectorSettings, substitute: Callable[[str], str]
) -> list[tuple[int, str, int]]:
    """``(hash, text, chat index)`` of each message a chat's collection holds
    (``messages``: the whole chat, oldest first)."""
    out: list[tuple[int, str, int]] = []
    for index, message in enumerate(messages):
        if message.is_system and not settings.keep_hidden:
            continue
        text = _resolved(message.text, substitute)
        if text:
            out.append((message_hash(text), text, index))
    return out


def chat_items(
    messages: Sequence[Message], settings: VectorSettings, substitute: Callable[[str], str]
) -> list[Item]:
    """The items of a chat's collection: each message's chunks, sharing its hash."""
    return _chunks(chat_texts(messages, settings, substitute), settings)


def _chunks(texts: Sequence[tuple[int, str, int]], settings: VectorSettings) -> list[Item]:
    delimiters = chunk_delimiters(settings.force_chunk_delimiter)
    return [
        (digest, chunk, index)
        for digest, text, index in texts
        for chunk in split_recursive(text, settings.message_chunk_size, delimiters)
    ]


async def sync_chat(
    collections: VectorCollections,
    collection: str,
    messages: Sequence[Message],
    settings: VectorSettings,
    substitute: Callable[[str], str],
) -> tuple[int, int]:
    """Bring a chat's collection up to date: embed the messages it lacks (only those are
    chunked), delete the hashes no message has any more. Returns (added items, deleted)."""
    texts = chat_texts(messages, settings, substitute)
    have = await collections.hashes(collection)
    new = [t for t in texts if t[0] not in have]
    stale = sorted(have - {t[0] for t in texts})
    items = _chunks(new, settings)
    if items:
        await collections.add(collection, items)
    if stale:
        await collections.delete(collection, stale)
    return len(items), len(stale)


@dataclass(frozen=True, slots=True)
class Recall:
    """What retrieval did: the history without the moved messages, and the prompt."""

    messages: list[Message]
    prompt: ExtensionPrompt | None
    recalled: tuple[Message, ...] = ()


async def recall(
    messages: Sequence[Message],
    settings: VectorSettings,
    collections: VectorCollections,
    collection: str,
    substitute: Callable[[str], str],
    *,
    compat: bool = True,
) -> Recall:
    """Retrieve for one generation (``messages``: the prompt's chat, oldest first, system
    messages left out). ``substitute`` resolves macros (in texts and the template)."""
    chat = list(messages)
    unchanged = Recall(chat, None)
    if not settings.enabled_chats or len(chat) < settings.protect:
        return unchanged
    text = query_text(chat, settings.query, substitute)
    if not text:
        return unchanged
    hits = await collections.query(collection, text, settings.insert)
    if not compat:
        hits = [hit for hit in hits if hit.score >= settings.score_threshold]
    ranked: list[int] = []
    for hit in hits:
        if hit.hash not in ranked:
            ranked.append(hit.hash)
    if settings.protect > 0:
        candidates = chat[: len(chat) - settings.protect]
    else:
        candidates = [] if compat else chat
    found: dict[int, Message] = {}
    for message in candidates:
        if not message.text:
            continue
        digest = message_hash(_resolved(message.text, substitute))
        if digest in ranked and digest not in found:
            found[digest] = message
    if not found:
        return unchanged
    # best match last
    picked = sorted(found.items(), key=lambda kv: -ranked.index(kv[0]))
    recalled = [message for _, message in picked]
    moved = {id(m) for m in recalled}
    kept: list[Message] = []
    skip_next = False
    for message in chat:
        if skip_next:
            # SillyTavern splices inside its forward loop: the message after a removed one
            # is never looked at, so it stays.
            skip_next = False
            kept.append(message)
            continue
        if id(message) in moved:
            skip_next = compat
            continue
        kept.append(message)
    joined = "\n\n".join(collapse_newlines(f"{m.name}: {m.text}").strip() for m in recalled)
    # the template's macros resolve, the recalled texts are inserted as they are
    value = joined.join(substitute(part) for part in settings.template.split("{{text}}"))
    prompt = ExtensionPrompt(value, settings.position, settings.depth, 0, scan=settings.include_wi)
    return Recall(kept, prompt, tuple(recalled))
