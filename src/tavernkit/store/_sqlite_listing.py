"""One page of a record listing (:meth:`~tavernkit.store.protocol.Store.list_page`) read
through the listing indexes of migration 011, in the SQL both backends share.

Each order has an index that holds every column of a listing line (owner, kind, the order's
key, name, created, id, updated), so a page is read from the index alone: the rows, whose
``data`` column is a whole card, are never touched, and a page in the index's order stops
after ``offset + limit`` entries. The total is the count the triggers of migration 013 keep
per owner and kind (a filtered one, a count over the index; none on the last page, where the
page tells it). A name filter reads the index's names (``name LIKE``): short text, no
record; it ignores the case of ASCII letters on SQLite (its LIKE), of every letter on
PostgreSQL (``ILIKE``)."""

from __future__ import annotations

from tavernkit.models._base import DEFAULT_OWNER
from tavernkit.store._sqlite_base import SqliteBase
from tavernkit.store.protocol import ListOrder, RecordPage

__all__ = ["ORDER_SQL", "SqliteListing", "count_sql", "like_pattern", "page_sql"]

#: each order's ORDER BY: its index's columns after (owner, kind), so no sort step
ORDER_SQL: dict[ListOrder, str] = {
    "name": "lower(name), name, created, id",
    "name_desc": "lower(name) DESC, name DESC, created DESC, id DESC",
    "newest": "created DESC, id DESC",
    "oldest": "created, id",
    "updated": "updated DESC, id DESC",
}

_COLUMNS = "SELECT kind, id, name, owner, created, updated FROM records"


def _where(named: bool) -> str:
    where = " WHERE owner = ? AND kind = ?"
    return where + " AND name LIKE ? ESCAPE '\\'" if named else where


def page_sql(order: ListOrder, named: bool) -> str:
    """A page's statement: owner, kind (and the name pattern when ``named``), limit, offset."""
    return f"{_COLUMNS}{_where(named)} ORDER BY {ORDER_SQL[order]} LIMIT ? OFFSET ?"


def count_sql(named: bool) -> str:
    """The listing's count: owner, kind (and the name pattern when ``named``). Unfiltered, it
    is the row the triggers of migration 013 keep (none: no record of the kind)."""
    if not named:
        return "SELECT n FROM record_counts WHERE owner = ? AND kind = ?"
    return f"SELECT count(*) FROM records{_where(named)}"


def like_pattern(text: str) -> str:
    """A LIKE pattern (``ESCAPE '\\'``) matching names that contain ``text``, lowered."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SqliteListing(SqliteBase):
    async def list_page(
        self,
        kind: str,
        *,
        owner: str = DEFAULT_OWNER,
        offset: int = 0,
        limit: int = 50,
        name_contains: str | None = None,
        order: ListOrder = "name",
    ) -> RecordPage:
        self._check_kind(kind)
        params: list[object] = [owner, kind]
        if name_contains:
            params.append(like_pattern(name_contains))
        named = bool(name_contains)
        async with self._read() as db:
            rows = list(await db.execute_fetchall(page_sql(order, named), (*params, limit, offset)))
            if (rows and len(rows) < limit) or (not rows and offset == 0):
                total = offset + len(rows)  # the last page: the count is known
            else:
                counted = await db.execute_fetchall(count_sql(named), params)
                found = next(iter(counted), None)
                total = 0 if found is None else int(found[0])
        return RecordPage([self._info(r) for r in rows], total)
