"""Shared fixtures: an isolated data dir per test, and the folders under ../shared.

Tests that read ../shared take the folder from ``TAVERNKIT_CONFORMANCE_DIR`` or
``TAVERNKIT_WIRE_FIXTURES`` (default: ../shared/... beside the repo) and skip when it is absent,
so the suite passes on a fresh clone without it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from _services import PostgresCluster, RedisServer, start_postgres, start_redis

REPO_ROOT = Path(__file__).resolve().parent.parent


def conformance_root() -> Path:
    """The conformance folder (may not exist)."""
    env = os.environ.get("TAVERNKIT_CONFORMANCE_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "conformance"


def wire_fixtures_root() -> Path:
    env = os.environ.get("TAVERNKIT_WIRE_FIXTURES")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "fixtures" / "wire"


@pytest.fixture
def st_default_data() -> Path:
    """SillyTavern's shipped default data (card, lorebook, presets); skips when absent."""
    path = conformance_root() / "data" / "st-1.18-default"
    if not path.is_dir():
        pytest.skip(f"SillyTavern default data not found at {path}")
    return path


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own TAVERNKIT_HOME, so nothing touches the user's data."""
    home = tmp_path_factory.mktemp("tavernkit-home")
    monkeypatch.setenv("TAVERNKIT_HOME", str(home))
    return home


@pytest.fixture
def no_gc_pauses() -> Iterator[None]:
    """The cyclic garbage collector off while a test runs whose real timeouts are a few tenths
    of a second (its garbage is collected after it).

    Late in the suite the process holds about half a million objects, and a full collection
    stops it for 0.3-0.8 s (measured over a whole run, 2026-12-02): longer than the 0.2-0.3 s
    first-byte and idle limits these tests give a loopback upstream that answers within a
    millisecond. In CI a request that should have succeeded timed out that way
    (test_plan_everywhere, 2026-12-01). A test of the collector's own state keeps it on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# -- real PostgreSQL and Redis servers (tests/_services.py): one of each per session --------
@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    with start_postgres() as cluster:
        yield cluster


@pytest.fixture
async def postgres_url(postgres_cluster: PostgresCluster) -> AsyncIterator[str]:
    """A fresh, empty database on the session's cluster, dropped after the test."""
    url = await postgres_cluster.create_database()
    yield url
    await postgres_cluster.drop_database(url)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with start_redis() as server:
        yield server


@pytest.fixture
async def redis_url(redis_server: RedisServer) -> str:
    """The session's redis-server, emptied for this test."""
    import redis.asyncio  # the scale extra: only the tests that use Redis need it

    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        await client.flushall()
    finally:
        await client.aclose()
    return redis_server.url
