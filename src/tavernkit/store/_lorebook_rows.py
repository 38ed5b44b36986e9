"""A lorebook's entries as rows (migration ``015_lorebook_entries``): split from the book when
it is stored, put back in place when it is read whole.

A 20,000-entry book is a 36 MB record; an editor that changes one entry must write that entry,
not the book. So a book's ``records.data`` keeps everything but its entries, with
``"entries": {}`` where they were (the key keeps its place), and ``lorebook_entries`` holds one
row per entry: its key (``uid``), its place (``seq``) and its JSON. A whole read (export, a
turn's world info, the editor's first load) joins the rows' text in order inside the database
and puts it in the book's ``entries``: the same bytes as the book stored whole (both are
:func:`~tavernkit.store._message_rows.dumps`' compact JSON). A book whose ``entries`` is not an
object keeps it in ``records.data`` and has no rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tavernkit.store._message_rows import dumps
from tavernkit.store.record_types import ENTRY_LINE_FIELDS

__all__ = [
    "BOOK_KIND",
    "ENTRIES",
    "book_text",
    "entry_lines_text",
    "is_entry_path",
    "split_book",
]

#: the record kind whose entries live in rows, and the member that holds them
BOOK_KIND = "lorebook"
ENTRIES = "entries"

#: an entry row: (uid, seq, JSON text)
EntryRow = tuple[str, int, str]


def is_entry_path(kind: str, path: Sequence[str]) -> bool:
    """Whether the member ``path`` of a ``kind`` record lives in entry rows."""
    return kind == BOOK_KIND and len(path) > 0 and path[0] == ENTRIES


def split_book(data: dict[str, Any]) -> tuple[dict[str, Any], list[EntryRow]]:
    """The book to keep in ``records.data`` (its entries emptied, in place) and its entry rows;
    a book whose ``entries`` is not an object stays whole, with no rows."""
    entries = data.get(ENTRIES)
    if not isinstance(entries, dict):
        return data, []
    rest = {k: ({} if k == ENTRIES else v) for k, v in data.items()}
    rows = [(str(uid), seq, dumps(entry)) for seq, (uid, entry) in enumerate(entries.items())]
    return rest, rows


def book_text(rest: str, entries: str | None) -> str:
    """The whole book's JSON: ``rest`` (``records.data``) with ``entries``, the rows'
    ``"uid":{...}`` joined by commas in order (``None``: no rows), in its ``entries``. Only
    ``rest`` (small) is parsed; the entries' text is copied once, into the answer."""
    if entries is None:
        return rest
    doc = json.loads(rest)
    before: list[str] = []
    after: list[str] = []
    side = before
    for key, value in doc.items():
        if key == ENTRIES:
            side = after
            continue
        side.append(f"{dumps(key)}:{dumps(value)}")
    # a row added to a book that had no entries: its member goes last
    head = "{" + "".join(f"{part}," for part in before) + dumps(ENTRIES) + ":{"
    tail = "}" + "".join(f",{part}" for part in after) + "}"
    return "".join((head, entries, tail))


def entry_lines_text(rows: Sequence[tuple[str, str]], content_has: str | None = None) -> str:
    """The lines of the entry rows ``(uid, JSON text)`` as a JSON array (each the values of
    :data:`~tavernkit.store.record_types.ENTRY_LINE_FIELDS`, then the uid), in order; with
    ``content_has``, only the entries whose ``content`` holds it in any case. Parses every
    row: run it off the event loop."""
    needle = content_has.lower() if content_has else None
    lines: list[list[Any]] = []
    for uid, text in rows:
        entry = json.loads(text)
        if not isinstance(entry, dict):
            entry = {}
        if needle is not None:
            content = entry.get("content")
            if not isinstance(content, str) or needle not in content.lower():
                continue
        lines.append([*(entry.get(name) for name in ENTRY_LINE_FIELDS), uid])
    return dumps(lines)
