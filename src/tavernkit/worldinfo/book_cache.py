"""Compiled books kept across scans: found again by identity, by a vouched record digest, or
by content digest (an equal copy)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from tavernkit.jscompat import js_key_order
from tavernkit.worldinfo.compile import (
    CompiledBook,
    book_entries_wire,
    book_pairs,
    compile_entries,
    content_digest,
)

__all__ = ["BookCache"]


class BookCache:
    """Compiled books by (name, compat, content digest): compile once, reuse while the book is
    unchanged. Bounded, least-recently-used first out.

    A book first seen under a name no cached book bears is compiled without hashing it: no
    copy could be found by that hash. It is hashed (see ``CompiledBook.digest``) when another
    object of that name comes to be compared with it.

    A book whose content the caller already vouches for (:meth:`register`: a store record
    read by its revision, with the JSON it was validated from) is found by that digest without
    being dumped, and compiled from that JSON on a miss: the model's ``to_wire()`` of a big
    book costs more than compiling it.
    """

    def __init__(self, maxsize: int = 64) -> None:
        self._items: OrderedDict[int, CompiledBook] = OrderedDict()  # by id(compiled)
        self._by_digest: dict[tuple[str, bool, str], CompiledBook] = {}
        self._by_identity: dict[int, tuple[Any, CompiledBook]] = {}
        self._vouched: dict[int, tuple[Any, str, Mapping[str, Any]]] = {}
        self.maxsize = maxsize

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
        self._by_digest.clear()
        self._by_identity.clear()
        self._vouched.clear()

    def knows(self, book: Any) -> bool:
        """Whether ``book`` (this very object) was compiled or registered here."""
        known = self._by_identity.get(id(book))
        if known is not None and known[0] is book:
            return True
        vouched = self._vouched.get(id(book))
        return vouched is not None and vouched[0] is book

    def register(self, book: Any, digest: str, wire: Mapping[str, Any]) -> None:
        """Vouch that ``book`` (a value, never edited in place) is ``wire``, the JSON it was
        validated from (so ``book.to_wire() == wire``, the models' lossless guarantee), whose
        content hash is ``digest``. ``wire`` must be fresh JSON (``json.loads`` output) that
        nobody edits: compiled entries keep its entry objects."""
        if len(self._vouched) > 4 * self.maxsize:
            self._vouched.clear()
        self._vouched[id(book)] = (book, "record:" + digest, wire)

    def get(self, name: str, book: Any, *, compat: bool) -> CompiledBook:
        """The compiled book. The same object passed again is not re-read (books are treated
        as values: after editing one in place, pass a copy, a ``CompiledBook`` or call
        :meth:`clear`); an equal copy is found by its content digest."""
        if isinstance(book, CompiledBook):
            return book
        known = self._by_identity.get(id(book))
        if known is not None and known[0] is book:
            hit = known[1]
            if hit.name == name and hit.compat == compat and self._items.get(id(hit)) is hit:
                self._items.move_to_end(id(hit))
                return hit
        vouched = self._vouched.get(id(book))
        if vouched is not None and vouched[0] is book:
            found = self._by_digest.get((name, compat, vouched[1]))
            if found is None:
                entries, warnings = book_entries_wire(vouched[2], source=name)
                found = compile_entries(
                    name, entries, warnings, compat=compat, dumped=True, digest=vouched[1]
                )
            return self._keep(book, found)
        dumped = callable(getattr(book, "to_wire", None))
        entries, warnings = book_entries_wire(book, source=name)
        order = js_key_order(entries)
        digest: str | None = None
        # A copy can only be of a book of this name: with none cached, nothing is hashed.
        if any(c.name == name and c.compat == compat for c in self._items.values()):
            digest = content_digest(name, book_pairs(entries, order))
            same = self._find(name, compat, digest)
            if same is not None:
                return self._keep(book, same)
        # The entries just read, not a second ``to_wire()`` of a model book.
        compiled = compile_entries(
            name, entries, warnings, compat=compat, dumped=dumped, digest=digest, order=order
        )
        return self._keep(book, compiled)

    def _find(self, name: str, compat: bool, digest: str) -> CompiledBook | None:
        hit = self._by_digest.get((name, compat, digest))
        if hit is not None:
            return hit
        for c in self._items.values():  # books of this name compiled before any comparison
            if c.name == name and c.compat == compat and not c.has_digest:
                self._by_digest[(name, compat, c.digest)] = c
        return self._by_digest.get((name, compat, digest))

    def _keep(self, book: Any, compiled: CompiledBook) -> CompiledBook:
        self._items[id(compiled)] = compiled
        self._items.move_to_end(id(compiled))
        if compiled.has_digest:
            self._by_digest[(compiled.name, compiled.compat, compiled.digest)] = compiled
        if len(self._by_identity) > 4 * self.maxsize:
            self._by_identity.clear()
        self._by_identity[id(book)] = (book, compiled)
        while len(self._items) > self.maxsize:
            _, old = self._items.popitem(last=False)
            if old.has_digest:
                key = (old.name, old.compat, old.digest)
                if self._by_digest.get(key) is old:
                    del self._by_digest[key]
        return compiled
