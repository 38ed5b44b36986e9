"""``ServerSettings.database`` / ``.redis`` and what :func:`create_app` builds from them: the
PostgreSQL store and the Redis event log, lock, rate limiter, key cooldowns and stop channel
(against the real servers of tests/_services.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tavernkit.errors import CoordinationError, ServerConfigError
from tavernkit.server.app import create_app
from tavernkit.server.redis_coordination import (
    RedisChatLock,
    RedisCooldownStore,
    RedisRateLimiter,
    RedisTurnEventLog,
    RedisTurnStops,
)
from tavernkit.server.state import ServerState
from tavernkit.store.postgres import PostgresStore

from .conftest import settings

SECRET = "Hq3Lk9Wd2Rt7Zp"


@pytest.mark.parametrize(
    ("field", "url", "says"),
    [
        ("database", f"mysql://root:{SECRET}@db/tk", "not a postgresql:// URL"),
        ("database", "/var/lib/tavernkit.db", "not a postgresql:// URL"),
        ("redis", f"http://user:{SECRET}@cache:6379", "not a redis://"),
    ],
)
def test_a_url_of_the_wrong_kind_is_refused_without_its_password(
    tmp_path: Path, field: str, url: str, says: str
) -> None:
    with pytest.raises(ServerConfigError, match=says) as caught:
        settings(tmp_path, **{field: url}).check()
    assert SECRET not in str(caught.value)


def test_a_lock_lease_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match="turn_lease_s"):
        settings(tmp_path, turn_lease_s=0).check()


async def test_the_app_runs_on_postgresql_and_shares_through_redis(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    app = create_app(
        settings(tmp_path / "home", database=postgres_url, redis=redis_url, turn_lease_s=4.0)
    )
    async with app.router.lifespan_context(app):
        state = app.state.server
        assert isinstance(state, ServerState)
        assert isinstance(state.tavern.store, PostgresStore)
        assert isinstance(state.turns.log, RedisTurnEventLog)
        assert isinstance(state.turns.lock, RedisChatLock)
        assert isinstance(state.turns.stops, RedisTurnStops)
        assert state.turns.lease_s == 4.0
        assert isinstance(state.limiter, RedisRateLimiter)
        # the environment keys' cooldowns, for the server's owner and every user's view
        assert isinstance(state.tavern.key_cooldowns, RedisCooldownStore)
        assert state.tavern.for_owner("someone").key_cooldowns is state.tavern.key_cooldowns
    assert app.state.server is None


async def test_an_unreachable_redis_fails_the_start(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(settings(tmp_path / "home", redis=f"redis://:{SECRET}@127.0.0.1:{port}/0"))
    with pytest.raises(CoordinationError, match=f"127.0.0.1:{port}") as caught:
        async with app.router.lifespan_context(app):
            pass
    assert SECRET not in str(caught.value)
