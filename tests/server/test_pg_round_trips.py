"""What a turn through the server costs PostgreSQL and Redis.

PostgreSQL, counted at the store's driver bridge (:meth:`PostgresStore.trace` sees every
statement, ``BEGIN`` and ``COMMIT``, each a round trip): a turn's reads and writes are single
statements, each a snapshot or a transaction by itself, with no ``BEGIN`` or ``COMMIT``.
Redis, counted by the server itself (``INFO commandstats`` before and after the turn): every
command the process sent, its pipelines' commands each."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2 as httpx
import redis.asyncio

from chat._server import HangingServer, Reply
from chat.conftest import stock_world
from tavernkit.store.postgres import PostgresStore

from ._live import live_server
from ._sse import events_of
from .conftest import settings

PIECES = [f"piece {n}. " for n in range(40)]
#: measured: no transaction and 9 round trips for this 40-piece turn, each one statement: the
#: turn's start (the settings, the window and the global variables in one snapshot:
#: tavernkit.store.pg_turn_start), its messages appended, its streamed text, its finished reply
#: (tavernkit.store.pg_message_writes), and five short reads (the chat's row, the character's
#: and the turn's records' revisions, the character's links, the MCP servers). Before: 3
#: transactions and 26 round trips (the window was a read-only transaction beside two reads;
#: the append and the finished reply were transactions of four and five statements), before
#: that 4 and 32, and before that 12 and 48. Room for up to four more flushes of the reply's
#: text (one trip each: the swipe writer's 50 ms window on a busy machine).
MOST_TRANSACTIONS = 0
MOST_ROUND_TRIPS = 13


async def _turn(client: httpx.AsyncClient, chat: str) -> str | None:
    started = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
    assert started.status_code == 202, started.text
    async with client.stream("GET", started.json()["events"]) as response:
        async for event in events_of(response):
            if event.type == "done":
                return str(event.data.get("status"))
    return None


async def test_a_turn_on_postgresql_stays_under_its_round_trips(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    home = settings(tmp_path / "home", database=postgres_url, redis=redis_url)
    async with HangingServer() as upstream, live_server(home) as server:
        tk = server.state.tavern
        assert isinstance(tk.store, PostgresStore)
        await stock_world(tk, upstream.base_url)
        chat = (await tk.chats.new_chat("Mira")).id
        upstream.script(Reply(text="Warm."), Reply(text="".join(PIECES), chunks=PIECES))
        async with server.client() as client:
            assert await _turn(client, chat) == "completed"  # the first turn fills the caches
            seen: list[str] = []
            async with tk.store.trace(seen.append) as stats:
                assert await _turn(client, chat) == "completed"
        stored = await tk.chats.load(chat)
    assert stored.messages[-1].data["mes"] == "".join(PIECES)
    report = json.dumps({"transactions": stats.transactions, "round trips": len(seen)})
    assert seen.count("BEGIN") == stats.transactions, report
    assert stats.transactions <= MOST_TRANSACTIONS, report
    assert len(seen) <= MOST_ROUND_TRIPS, report
    # a transaction never holds a lone read (one statement sees one snapshot by itself)
    assert _lone_reads_in_transactions(seen) == [], report


def _lone_reads_in_transactions(seen: list[str]) -> list[str]:
    """The ``SELECT``s that were a transaction's only statement, with nothing written."""
    lone: list[str] = []
    for at, sql in enumerate(seen[:-2]):
        if sql == "BEGIN" and seen[at + 2] == "COMMIT" and seen[at + 1].startswith("SELECT"):
            lone.append(seen[at + 1])
    return lone


#: measured: 12 commands for this 40-piece turn (its log's start: ``XADD``, ``PEXPIRE``; its
#: batched pieces, its last events and its end in ``XADD``s, the last batch with the end's
#: ``PEXPIRE``, all in the process's shared pipeline; the chat's busy check, the lock's
#: ``SET`` and its release (a script: ``EVALSHA``, the ``GET`` and ``DEL`` in it)); before,
#: 14 (the start was a ``MULTI`` ... ``EXEC`` of its own), 16 (so was the end), and before
#: that 22 (the process read each batch back, an ``XREAD`` a write, to hand it to the
#: reader). Room for four more flushes (an ``XADD`` each).
MOST_REDIS_COMMANDS = 16


async def _redis_calls(client: redis.asyncio.Redis) -> dict[str, int]:
    info = await client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(stat["calls"]) for name, stat in info.items()}


async def test_a_turn_on_redis_stays_under_its_commands(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    home = settings(tmp_path / "home", database=postgres_url, redis=redis_url)
    counter = redis.asyncio.Redis.from_url(redis_url)
    async with HangingServer() as upstream, live_server(home) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        chat = (await tk.chats.new_chat("Mira")).id
        upstream.script(Reply(text="Warm."), Reply(text="".join(PIECES), chunks=PIECES))
        async with server.client() as client:
            assert await _turn(client, chat) == "completed"  # the first turn fills the caches
            before = await _redis_calls(counter)
            assert await _turn(client, chat) == "completed"
            after = await _redis_calls(counter)
    await counter.aclose()
    after["info"] -= 1  # the count's own first INFO
    sent = {name: n - before.get(name, 0) for name, n in after.items() if n > before.get(name, 0)}
    report = json.dumps(sent, sort_keys=True)
    assert sent.get("xadd", 0) >= 3, report  # the turn's log was written in Redis
    # and not read back: the reader here had the writes themselves, its past included
    assert sent.get("xread", 0) == 0, report
    # the log's start and end ride the shared pipeline (its start, its last batch): no MULTI
    assert sent.get("multi", 0) == 0, report
    assert sum(sent.values()) <= MOST_REDIS_COMMANDS, report
