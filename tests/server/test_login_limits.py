"""Logins under attack (issue 34, finding 1), over a real uvicorn with accounts on: argon2
runs in the password threads, never on the event loop; a storm of logins past what one process
checks at once gets 429s before any hashing; the limits count per client address and per name
*and* address, so an attacker who names a user locks out only their own attempts (the user
still signs in from their own address). Client addresses are real: the clients bind 127.0.0.2,
127.0.0.3... on loopback.

Which thread runs argon2 is observed with a profile hook on ``argon2.low_level.verify_secret``
(the function every check goes through): nothing is replaced."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import argon2.low_level
import httpx2 as httpx

from tavernkit.server.passwords import THREAD_NAME
from tavernkit.server.settings import RateLimit

from ._live import LiveServer, live_server
from .conftest import PASSWORD, settings

_VERIFY = argon2.low_level.verify_secret.__code__


@contextmanager
def argon2_checks() -> Iterator[list[str]]:
    """The name of the thread of every argon2 check made while the block runs (threads
    started in the block included)."""
    seen: list[str] = []

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is _VERIFY:
            seen.append(threading.current_thread().name)

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def client_from(server: LiveServer, address: str) -> httpx.AsyncClient:
    """A client whose connections come from ``address`` (a loopback address of its own)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=server.url, timeout=30.0, transport=transport)


async def login(client: httpx.AsyncClient, name: str, password: str) -> httpx.Response:
    return await client.post("/auth/login", json={"name": name, "password": password})


async def test_a_login_storm_is_refused_before_any_hashing(tmp_path: Path) -> None:
    # the real argon2 profile (~0.2 s a check), one thread, two logins at a time
    conf = settings(
        tmp_path / "home",
        accounts=True,
        password_profile="RFC_9106_LOW_MEMORY",
        password_workers=1,
        login_pending=2,
        login_address_rate=RateLimit(1000, 60.0),
    )
    async with live_server(conf) as server, client_from(server, "127.0.0.2") as client:
        with argon2_checks() as checks:
            storm = [login(client, f"nobody-{n}", "wrong password") for n in range(12)]
            answers = await asyncio.gather(*storm)
        statuses = [r.status_code for r in answers]
        assert set(statuses) <= {401, 429}
        refused = [r for r in answers if r.status_code == 429]
        assert refused, "every login of the storm was checked"
        for r in refused:
            assert r.json()["error"]["type"] == "TooManyAttempts"
            assert int(r.headers["retry-after"]) >= 1
        # one argon2 check per answered login (an unknown name costs one too), none for a
        # refused one, and every check on a password thread: never on the event loop
        assert len(checks) == statuses.count(401)
        assert checks and all(name.startswith(THREAD_NAME) for name in checks), checks
        # the storm over, a login is checked again
        assert (await login(client, "nobody", "wrong password")).status_code == 401


async def test_a_named_user_still_signs_in_from_their_own_address(tmp_path: Path) -> None:
    conf = settings(
        tmp_path / "home",
        accounts=True,
        login_rate=RateLimit(3, 60.0),
        login_address_rate=RateLimit(6, 60.0),
    )
    async with live_server(conf) as server:
        await server.state.accounts.create_user("ann", PASSWORD)
        await server.state.accounts.create_user("bob", PASSWORD)
        attacker = client_from(server, "127.0.0.2")
        ann = client_from(server, "127.0.0.3")
        async with attacker, ann:
            for _ in range(3):
                assert (await login(attacker, "ann", "guess guess")).status_code == 401
            r = await login(attacker, "ann", PASSWORD)
            assert r.status_code == 429  # that name from that address: backed off
            assert r.json()["error"]["type"] == "TooManyAttempts"
            # ann is not locked out: from her own address she signs in
            r = await login(ann, "ann", PASSWORD)
            assert r.status_code == 200 and r.json()["name"] == "ann"
            # the attacker's address, whatever names it tries, is limited too
            for n in range(2):
                assert (await login(attacker, f"someone-{n}", "guess")).status_code == 401
            r = await login(attacker, "bob", PASSWORD)
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
            assert (await login(ann, "bob", PASSWORD)).status_code == 200


async def test_every_password_check_runs_once_in_the_password_threads(tmp_path: Path) -> None:
    conf = settings(tmp_path / "home", accounts=True)
    async with live_server(conf) as server:
        with argon2_checks() as checks:
            await server.state.accounts.create_user("carol", PASSWORD)
            async with client_from(server, "127.0.0.4") as client:
                assert (await login(client, "carol", PASSWORD)).status_code == 200
                assert (await login(client, "CAROL", "wrong password")).status_code == 401
                assert (await login(client, "nobody", "wrong password")).status_code == 401
        assert len(checks) == 3 and all(n.startswith(THREAD_NAME) for n in checks), checks


async def test_a_refused_address_is_answered_before_routing_on_a_live_connection(
    tmp_path: Path,
) -> None:
    """Once its limit refused an address, its logins are refused by the gate in front of the
    app (no store, no limiter, no hashing) until the window moves, on the same kept-alive
    connection; other addresses go on to the checks."""
    conf = settings(tmp_path / "home", accounts=True, login_address_rate=RateLimit(2, 60.0))
    async with live_server(conf) as server:
        accounts = server.state.accounts
        async with client_from(server, "127.0.0.2") as client:
            for n in range(2):
                assert (await login(client, f"x{n}", "guess")).status_code == 401
            assert accounts.quick_refusal("127.0.0.2") is None  # nothing refused yet
            answers = [await login(client, f"y{n}", "guess") for n in range(3)]
        assert [r.status_code for r in answers] == [429, 429, 429]
        assert all(r.headers.get("connection") != "close" for r in answers)
        refused = accounts.quick_refusal("127.0.0.2")
        assert refused is not None and 0 < refused.retry_after_s <= 60
        assert accounts.quick_refusal("127.0.0.3") is None
        async with client_from(server, "127.0.0.3") as other:
            assert (await login(other, "z", "guess")).status_code == 401


async def test_the_login_limits_are_shared_through_redis(tmp_path: Path, redis_url: str) -> None:
    """Two servers on one Redis count one address's logins together (and a name's from that
    address): the limit is the deployment's, not each process's."""
    conf = {
        "accounts": True,
        "redis": redis_url,
        "login_rate": RateLimit(2, 60.0),
        "login_address_rate": RateLimit(4, 60.0),
    }
    async with (
        live_server(settings(tmp_path / "a", **conf)) as a,
        live_server(settings(tmp_path / "b", **conf)) as b,
        client_from(a, "127.0.0.2") as to_a,
        client_from(b, "127.0.0.2") as to_b,
    ):
        assert (await login(to_a, "ann", "guess")).status_code == 401
        assert (await login(to_b, "ann", "guess")).status_code == 401
        assert (await login(to_a, "ann", "guess")).status_code == 429  # the pair, across both
        assert (await login(to_b, "bob", "guess")).status_code == 401
        assert (await login(to_a, "carol", "guess")).status_code == 429  # the address: 4 counted
