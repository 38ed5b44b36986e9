"""Searching the shown text of an owner's messages (:meth:`Store.search_messages`).

SQLite: the ``message_search`` table of migration 008, an FTS5 index of ``messages.mes`` by
trigrams, which triggers on ``messages`` keep (every write of a message's shown text, whatever
the call: append, edit, swipe, streaming, truncation, a chat's delete). A trigram index finds
a term anywhere, inside a word, in any script (CJK, which no word tokenizer splits, included),
case-insensitively, and needs no language; a term under three characters has no trigram, so
it is checked on the text of each message in scope (``instr``). The index holds every owner's
messages: the owner, chat and character conditions apply to what it finds.

PostgreSQL (:class:`~tavernkit.store.postgres.PostgresStore`) runs the same query with its own
match conditions (:func:`~tavernkit.store.postgres.postgres_match`).

One query gives a page and the total (``COUNT(*) OVER ()`` before the ``LIMIT``): the hits are
sorted anyway, so they are all found anyway. Only the page's rows read a message's JSON (for
the speaker's name).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tavernkit.errors import FormatError
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.store._message_rows import FLAG_USER
from tavernkit.store._search_text import (
    TRIGRAM_MIN,
    fts5_phrase,
    make_snippet,
    parse_query,
    searchable,
)
from tavernkit.store._sqlite_chats import SqliteChats
from tavernkit.store.chat_types import MessageHit, MessageHits
from tavernkit.store.sqlite_thread import SqliteConnection

__all__ = ["MatchSql", "SqliteSearch", "sqlite_match"]


@dataclass(frozen=True, slots=True)
class MatchSql:
    """Conditions on ``m`` (a ``messages`` row) that hold for the messages a search's terms
    match, and their parameters, in order."""

    where: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)


def sqlite_match(terms: Sequence[str], indexed: bool) -> MatchSql:
    """SQLite's conditions: the terms the trigram index can find (three characters or more)
    as one FTS5 query of literal strings (each quoted: see
    :func:`~tavernkit.store._search_text.fts5_phrase`), the others checked on the text.
    ``indexed``: the database has the index (an SQLite without the trigram tokenizer, older
    than 3.34, migrated without it, and checks every term on the text)."""
    match = MatchSql()
    found = [t for t in terms if indexed and len(t) >= TRIGRAM_MIN]
    if found:
        match.where.append(
            "m.rowid IN (SELECT rowid FROM message_search WHERE message_search MATCH ?)"
        )
        match.params.append(" ".join(fts5_phrase(t) for t in found))
    for term in terms:
        if term not in found:
            # lower() folds ASCII only, on both sides alike
            match.where.append("instr(lower(m.mes), lower(?)) > 0")
            match.params.append(term)
    return match


#: the page's hits (keys only while sorting: the JSON is read for the page's rows alone)
_PAGE_SQL = (
    "SELECT p.id, p.chat_id, p.position, p.name, p.character_id, p.character_name, p.total, "
    "m.body, m.mes, m.flags FROM (SELECT m.id, m.chat_id, m.position, c.name, c.character_id, "
    "c.character_name, c.updated, COUNT(*) OVER () AS total "
    "FROM messages m JOIN chats c ON c.id = m.chat_id WHERE {where} "
    "ORDER BY c.updated DESC, m.chat_id, m.position DESC LIMIT ? OFFSET ?) p "
    "JOIN messages m ON m.id = p.id ORDER BY p.updated DESC, p.chat_id, p.position DESC"
)
_COUNT_SQL = "SELECT COUNT(*) FROM messages m JOIN chats c ON c.id = m.chat_id WHERE {where}"


class SqliteSearch(SqliteChats):
    #: the conditions a query's terms become (PostgreSQL's store has its own)
    _search_match = staticmethod(sqlite_match)
    #: whether the database has the trigram index (read once, at the first search)
    _search_indexed: bool | None = None

    async def search_messages(
        self,
        query: str,
        *,
        owner: str = DEFAULT_OWNER,
        chat: str | None = None,
        character: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> MessageHits:
        terms = parse_query(query)
        if not terms:
            raise FormatError("a search needs some text to look for", field="query")
        if limit < 1 or offset < 0:
            raise FormatError(f"no page of {limit} hits from {offset}", field="limit")
        # A search has no bound on what it reads (a common word, a long history): it runs on
        # the store's thread, never on the event loop's.
        async with self._read() as db:
            where, params = await self._search_scope(db, owner, chat, character)
            if not all(searchable(t) for t in terms):
                return MessageHits([], 0)  # no stored text holds such a character
            match = self._search_match(terms, await self._has_search_index(db))
            sql_where = " AND ".join([*where, *match.where])
            params += match.params
            rows = list(
                await db.execute_fetchall(
                    _PAGE_SQL.format(where=sql_where), [*params, limit, offset]
                )
            )
            if rows:
                total = int(rows[0][6])
            elif offset > 0:  # past the end: the count is asked for on its own
                total = int(
                    await self._scalar(db, _COUNT_SQL.format(where=sql_where), tuple(params))
                )
            else:
                total = 0
        return MessageHits([_hit(row, terms) for row in rows], total)

    async def _search_scope(
        self, db: SqliteConnection, owner: str, chat: str | None, character: str | None
    ) -> tuple[list[str], list[Any]]:
        """The conditions of the owner's messages in scope: the owner's always (the index
        holds every owner's), one chat's or one character's when asked (each resolved for the
        owner, so another's is :class:`~tavernkit.errors.NotFound`)."""
        where, params = ["c.owner = ?"], [owner]
        if chat is not None:
            row = await self._chat_row(db, chat, owner)
            where.append("m.chat_id = ?")
            params.append(row[0])
        if character is not None:
            info, _ = await self._resolve(db, "character", character, owner)
            where.append("c.character_id = ?")
            params.append(info.id)
        return where, params

    async def _has_search_index(self, db: SqliteConnection) -> bool:
        if self._search_indexed is None:
            rows = await db.execute_fetchall(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'message_search'"
            )
            self._search_indexed = bool(list(rows))
        return self._search_indexed


def _hit(row: Any, terms: Sequence[str]) -> MessageHit:
    mid, chat_id, position, chat_name, character_id, character_name, _, body, mes, flags = row
    data = json.loads(body)
    name = data.get("name")
    # a text no column can hold stays inside the JSON (see _message_rows); so shown, not found
    text = mes if mes is not None else data.get("mes")
    return MessageHit(
        chat_id=str(chat_id),
        chat_name=str(chat_name),
        character_id=character_id,
        character_name=character_name,
        message_id=str(mid),
        index=int(position),
        name=name if isinstance(name, str) else "",
        is_user=bool(int(flags) & FLAG_USER),
        snippet=make_snippet(text if isinstance(text, str) else "", terms),
    )
