"""Fixtures for the store tests: a fresh store, closed afterwards, on each backend.

``store`` runs every test that takes it twice: on a SQLite file in tmp_path and on a fresh
database of the session's real PostgreSQL cluster (tests/_services.py; skipped outside CI
when PostgreSQL is not installed). Tests about SQLite itself (its file, its trace of trigger
steps, cancellation on its thread) take ``sqlite_store``, or ``db_path`` with ``store``, which
keeps them on SQLite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _services import PostgresCluster
from tavernkit.store import SqliteStore, Store, open_postgres_store
from tavernkit.store.sqlite import open_store as open_sqlite_store

BACKENDS = ("sqlite", "postgres")


class StepClock:
    """A clock that moves one second per reading, so ordering by time is deterministic."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" in metafunc.fixturenames:
        # a test that reads the SQLite file (db_path) is about SQLite; so is a module that
        # says so (BACKENDS = ("sqlite",))
        backends = getattr(metafunc.module, "BACKENDS", BACKENDS)
        if "db_path" in metafunc.fixturenames:
            backends = ("sqlite",)
        metafunc.parametrize("backend", backends, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
async def sqlite_store(db_path: Path) -> AsyncIterator[SqliteStore]:
    s = await open_sqlite_store(db_path, clock=StepClock())
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Store]:
    if backend == "sqlite":
        s: Store = await open_sqlite_store(tmp_path / "store.db", clock=StepClock())
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        url = await cluster.create_database()
        request.addfinalizer(lambda: asyncio.run(cluster.drop_database(url)))
        s = await open_postgres_store(url, clock=StepClock(), key_dir=tmp_path / "keys")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def make_clock() -> Callable[[], StepClock]:
    return StepClock
