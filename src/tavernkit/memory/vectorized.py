"""Vectorized lorebook entries: activation by embedding similarity (reference §2.6).

The entries of every scanned book that are enabled, have content and are ``vectorized`` (or
every such entry with ``enabled_for_all``) are embedded by their content (decorators
removed, macros *not* resolved), one collection per book (``world_<cyrb53(book name)>``),
synchronized by content hash. The query text is the last ``query`` messages, newest first.
The best ``max_entries`` entries over all books that score at least ``score_threshold`` are
activated, and so is every other entry of the scanned books with the same content. The world
info scan then treats them as matched by a key (``scan(force_activate=...)``): filters,
inclusion groups, probability and the budget still apply, and they sort ahead of the other
non-sticky entries. Keyword activation is unchanged (a vectorized entry still fires on its
keys).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tavernkit.jscompat import cyrb53
from tavernkit.memory.collections import Item, VectorCollections
from tavernkit.memory.text import message_hash, query_text
from tavernkit.models.chat import Message
from tavernkit.models.memory import VectorSettings
from tavernkit.worldinfo.compile import CompiledBook
from tavernkit.worldinfo.index import Book, default_engine, select_books

__all__ = ["book_collection", "vectorized_activations", "vectorized_items"]


def book_collection(name: str) -> str:
    """SillyTavern's collection id of a lorebook."""
    return f"world_{cyrb53(name)}"


def _compiled(books: Iterable[Book | tuple[Any, ...]], compat: bool) -> list[CompiledBook]:
    engine = default_engine()
    as_books = [b if isinstance(b, Book) else Book(*b) for b in books]
    return [engine.compile(b, compat=compat) for b in select_books(as_books)]


def vectorized_items(
    books: Iterable[Book | tuple[Any, ...]], settings: VectorSettings, *, compat: bool = True
) -> dict[str, list[Item]]:
    """The items to embed per book name (books without candidates left out), each content
    once, in the books' entry order."""
    out: dict[str, list[Item]] = {}
    for book in _compiled(books, compat):
        items: list[Item] = []
        seen: set[int] = set()
        for entry in book.entries:
            vectorized = bool(entry.wire.get("vectorized")) or settings.enabled_for_all
            if entry.disable or not entry.content or not vectorized:
                continue
            digest = message_hash(entry.content)
            if digest not in seen:
                seen.add(digest)
                uid = entry.uid if isinstance(entry.uid, int) else 0
                items.append((digest, entry.content, uid))
        if items:
            out[book.name] = items
    return out


async def vectorized_activations(
    books: Sequence[Book | tuple[Any, ...]],
    messages: Sequence[Message],
    settings: VectorSettings,
    collections: VectorCollections,
    substitute: Callable[[str], str],
    *,
    compat: bool = True,
) -> frozenset[str]:
    """The ``"world.uid"`` keys that vector matching activates for this generation
    (``messages``: the prompt's chat, oldest first, hidden and system messages left out)."""
    if not settings.enabled_world_info:
        return frozenset()
    per_book = vectorized_items(books, settings, compat=compat)
    if not per_book:
        return frozenset()
    names = [book_collection(name) for name in per_book]
    for name, items in per_book.items():
        await collections.sync(book_collection(name), items)
    text = query_text(messages, settings.query, substitute)
    if not text:
        return frozenset()
    hits = await collections.query_multi(
        names, text, settings.max_entries, settings.score_threshold
    )
    activated = {hit.hash for hit in hits}
    keys: set[str] = set()
    for book in _compiled(books, compat):
        for entry in book.entries:
            if entry.content and message_hash(entry.content) in activated:
                keys.add(entry.key_id)
    return frozenset(keys)
