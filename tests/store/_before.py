"""The migrations a database had before ``name`` (a test of that migration stores rows as the
older version did, then opens the store, which runs it)."""

from __future__ import annotations

from tavernkit.store.migrations import MIGRATIONS, Migration


def migrations_before(name: str) -> tuple[tuple[str, Migration], ...]:
    names = [n for n, _ in MIGRATIONS]
    return tuple(MIGRATIONS[: names.index(name)])
