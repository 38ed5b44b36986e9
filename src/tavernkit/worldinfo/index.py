"""The scan index: sorted entries of the active books plus their needles, built once per book
set and settings and reused across scans (the per-turn cost is then the chat text only)."""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Literal

from tavernkit.jscompat import js_to_number
from tavernkit.worldinfo.book_cache import BookCache
from tavernkit.worldinfo.compile import CompiledBook, CompiledEntry
from tavernkit.worldinfo.gc_pause import gc_paused
from tavernkit.worldinfo.key_index import KeyIndex, KeySlot, has_macro, index_keys
from tavernkit.worldinfo.matcher import SegmentMatcher
from tavernkit.worldinfo.regex_keys import RegexGuard
from tavernkit.worldinfo.result import ActivatedEntry

__all__ = ["Book", "KeySlot", "ScanIndex", "Scope", "WorldInfoEngine", "has_macro"]

Scope = Literal["global", "character", "chat", "persona"]


@dataclass(frozen=True, slots=True)
class Book:
    """A book to scan: its name (the ``world`` of its entries), its data (a ``Lorebook`` model,
    a world-info dict or a :class:`CompiledBook`) and where it comes from."""

    name: str
    data: Any
    scope: Scope = "global"


_ORDER = attrgetter("order")
_GROUPS = attrgetter("group_names")


def _sort_desc(entries: list[CompiledEntry]) -> list[CompiledEntry]:
    # sortFn = (a, b) => b.order - a.order; JS sort is stable, and so is a reverse sort (equal
    # orders keep file order; orders are never NaN once compiled).
    return sorted(entries, key=_ORDER, reverse=True)


@dataclass(eq=False, kw_only=True)
class ScanIndex(KeyIndex):
    """The key index of the sorted entries of a book set, with what scans reuse."""

    entries: list[CompiledEntry]
    matcher: SegmentMatcher
    warnings: tuple[str, ...]
    position: dict[int, int] = field(default_factory=dict)
    #: Per entry: what its view depends on besides the loop (scan depth as a JS number, match
    #: mask), so entries with equal keys share one view per loop.
    view_keys: list[tuple[Any, int]] = field(default_factory=list)
    has_groups: bool = False
    #: Result records by entry index, reused across scans while an entry's content is the same.
    activated_cache: dict[int, ActivatedEntry] = field(default_factory=dict)
    #: The compiled books the index was built from, in ``select_books`` order.
    books: tuple[CompiledBook, ...] = ()


def order_entries(
    books: Sequence[tuple[Scope, CompiledBook]], strategy: int
) -> list[CompiledEntry]:
    """SillyTavern's ``getSortedEntries`` order: chat book, persona book, then global and
    character books by strategy (0 evenly, 1 character first, 2 global first), each sorted by
    descending ``order`` with file order kept for ties."""
    by_scope: dict[str, list[CompiledEntry]] = {
        "global": [],
        "character": [],
        "chat": [],
        "persona": [],
    }
    for scope, book in books:
        by_scope[scope].extend(book.entries)
    glob, char = by_scope["global"], by_scope["character"]
    if strategy == 1:
        rest = _sort_desc(char) + _sort_desc(glob)
    elif strategy == 2:
        rest = _sort_desc(glob) + _sort_desc(char)
    else:
        rest = _sort_desc(glob + char)
    return _sort_desc(by_scope["chat"]) + _sort_desc(by_scope["persona"]) + rest


def build_index(
    books: Sequence[tuple[Scope, CompiledBook]],
    strategy: int,
    case_sensitive: bool,
    whole_words: bool,
) -> ScanIndex:
    entries = order_entries(books, strategy)
    keyed = index_keys(entries, case_sensitive, whole_words)
    return ScanIndex(
        **{f.name: getattr(keyed, f.name) for f in fields(KeyIndex)},
        entries=entries,
        matcher=SegmentMatcher(keyed.table),
        warnings=tuple(w for _, b in books for w in b.warnings),
        position=dict(zip(map(id, entries), range(len(entries)), strict=True)),
        view_keys=[(None, e.match_mask) if e.scan_depth is None else _view_key(e) for e in entries],
        has_groups=any(map(_GROUPS, entries)),
        books=tuple(b for _, b in books),
    )


def _view_key(e: CompiledEntry) -> tuple[Any, int]:
    if e.scan_depth is None:
        return (None, e.match_mask)
    depth = js_to_number(e.scan_depth)
    return ("nan" if math.isnan(depth) else depth, e.match_mask)


def select_books(books: Sequence[Book]) -> list[Book]:
    """SillyTavern's de-duplication of book sources: a character book already global, or the
    chat or persona book, is skipped; the chat book is skipped if global; the persona book if
    it is the chat book or global; a name listed twice in one scope is scanned once."""
    global_names = {b.name for b in books if b.scope == "global"}
    chat_names = {b.name for b in books if b.scope == "chat"}
    persona_names = {b.name for b in books if b.scope == "persona"}
    out: list[Book] = []
    seen: set[tuple[str, str]] = set()
    for b in books:
        if (b.scope, b.name) in seen:
            continue
        if b.scope == "character" and (
            b.name in global_names or b.name in chat_names or b.name in persona_names
        ):
            continue
        if b.scope == "chat" and b.name in global_names:
            continue
        if b.scope == "persona" and (b.name in chat_names or b.name in global_names):
            continue
        seen.add((b.scope, b.name))
        out.append(b)
    return out


class WorldInfoEngine:
    """Caches compiled books and scan indexes, and owns the regex guard.

    Results never depend on the caches: a scan through a fresh engine gives the same result.
    One engine may be shared by many chats; it is not thread-safe.
    """

    def __init__(self, *, regex_timeout_s: float = 1.0, max_indexes: int = 16) -> None:
        self.books = BookCache()
        self.guard = RegexGuard(timeout_s=regex_timeout_s)
        self._indexes: OrderedDict[tuple[Any, ...], ScanIndex] = OrderedDict()
        self._max_indexes = max_indexes

    def compile(self, book: Book, *, compat: bool) -> CompiledBook:
        return self.books.get(book.name, book.data, compat=compat)

    def index(
        self,
        books: Sequence[Book],
        *,
        strategy: int,
        case_sensitive: bool,
        whole_words: bool,
        compat: bool,
    ) -> ScanIndex:
        with gc_paused():
            return self._index(books, strategy, case_sensitive, whole_words, compat)

    def _index(
        self,
        books: Sequence[Book],
        strategy: int,
        case_sensitive: bool,
        whole_words: bool,
        compat: bool,
    ) -> ScanIndex:
        compiled = [(b.scope, self.compile(b, compat=compat)) for b in select_books(books)]
        # Compiled books by identity (the index pins them, so an id is never reused while its
        # index is kept): a compiled book is a value, and asking for its digest could cost a
        # hash of the whole book.
        key = (
            tuple((scope, id(c)) for scope, c in compiled),
            strategy,
            case_sensitive,
            whole_words,
        )
        hit = self._indexes.get(key)
        if hit is not None and all(a is b for a, (_, b) in zip(hit.books, compiled, strict=True)):
            self._indexes.move_to_end(key)
            return hit
        idx = build_index(compiled, strategy, case_sensitive, whole_words)
        self._indexes[key] = idx
        if len(self._indexes) > self._max_indexes:
            self._indexes.popitem(last=False)
        return idx

    def close(self) -> None:
        self.guard.close()


@functools.lru_cache(maxsize=1)
def default_engine() -> WorldInfoEngine:
    """The engine :func:`~tavernkit.worldinfo.scan` uses when none is given (a memo only)."""
    return WorldInfoEngine()
