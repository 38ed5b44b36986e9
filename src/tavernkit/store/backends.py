"""Open the store a target names: a ``postgresql://`` URL is the PostgreSQL store, anything
else (a path, or nothing for the data dir's ``tavernkit.db``) the embedded SQLite one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tavernkit.store.postgres import DEFAULT_DATABASE_POOL, is_postgres_url, open_postgres_store
from tavernkit.store.protocol import Store
from tavernkit.store.record_types import ModelRegistry
from tavernkit.store.sqlite import new_record_id
from tavernkit.store.sqlite import open_store as open_sqlite_store

__all__ = ["is_postgres_url", "open_store"]


async def open_store(
    target: Path | str | None = None,
    *,
    models: ModelRegistry | None = None,
    clock: Callable[[], datetime] | None = None,
    new_id: Callable[[], str] = new_record_id,
    key_dir: Path | None = None,
    pool_size: int | None = None,
) -> Store:
    """The store at ``target``, opened (created and migrated as needed): PostgreSQL for a
    ``postgresql://`` / ``postgres://`` URL (its key secrets in ``key_dir``, default
    :func:`~tavernkit.store.postgres.default_key_dir`; at most ``pool_size`` connections),
    SQLite for a path (default: the data dir's; its keys beside it)."""
    if isinstance(target, str) and is_postgres_url(target):
        size = pool_size or DEFAULT_DATABASE_POOL
        if clock is None:
            return await open_postgres_store(
                target, models=models, new_id=new_id, key_dir=key_dir, max_size=size
            )
        return await open_postgres_store(
            target, models=models, clock=clock, new_id=new_id, key_dir=key_dir, max_size=size
        )
    if clock is None:
        return await open_sqlite_store(target, models=models, new_id=new_id)
    return await open_sqlite_store(target, models=models, clock=clock, new_id=new_id)
