"""Fixtures for the store tests: a fresh SQLite store in tmp_path, closed afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tavernkit.store import SqliteStore, open_store


class StepClock:
    """A clock that moves one second per reading, so ordering by time is deterministic."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    s = await open_store(db_path, clock=StepClock())
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def make_clock() -> Callable[[], StepClock]:
    return StepClock
