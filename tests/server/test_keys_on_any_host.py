"""Stored API keys on any host (issue 37): real ``tavernkit serve`` processes with data folders
of their own on one PostgreSQL database. A key saved through A is used by B, given the same
``TAVERNKIT_SECRET_KEY`` (the turn reaches the scripted upstream with that key); the database
holds it sealed, never in plain; a process not given the key (C) fails the turn with a typed
error that names no path, no key id and no secret."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx2 as httpx
import pytest
import pytest_asyncio

from _services import PostgresCluster
from chat._server import HangingServer, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern
from tavernkit.store.admin import COPIED_TABLES

from ._processes import ServeProcess, start_serve
from ._sse import parse_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "sk-any-host-Q9g8h7j6k5m4n3p2ZYX"
KEK = "deployment-kek-Zm9vYmFyYmF6cXV4cXV1eGNvcmdl"


@dataclass
class Hosts:
    a: ServeProcess
    b: ServeProcess
    #: given no secret key: it makes one of its own, which is not the deployment's
    c: ServeProcess
    upstream: HangingServer
    tk: Tavern
    database: str
    root: Path
    #: the PostgreSQL cluster's data folder (its files, WAL included)
    cluster_data: Path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def hosts(
    postgres_cluster: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Hosts]:
    database = await postgres_cluster.create_database()
    root = tmp_path_factory.mktemp("any-host")

    def host(name: str, **more: str) -> dict[str, str]:
        # a host of its own: its data dir and (for older versions' files) its key folder
        return {
            "TAVERNKIT_HOME": str(root / name),
            "TAVERNKIT_KEY_DIR": str(root / name / "keys"),
            **more,
        }

    try:
        async with HangingServer() as upstream, Tavern(root / "setup", database=database) as tk:
            await stock_world(tk, upstream.base_url)
            a, b, c = await asyncio.gather(
                start_serve(root / "a", "--database", database, env=host("a", **_kek())),
                start_serve(root / "b", "--database", database, env=host("b", **_kek())),
                start_serve(root / "c", "--database", database, env=host("c")),
            )
            try:
                hosts = Hosts(a, b, c, upstream, tk, database, root, postgres_cluster.data)
                await _save_key_through_a(hosts)
                yield hosts
            finally:
                await asyncio.gather(a.stop(), b.stop(), c.stop())
    finally:
        await postgres_cluster.drop_database(database)


def _files_hold(folder: Path, needle: bytes) -> list[Path]:
    """The files under ``folder`` whose bytes hold ``needle``."""
    found = []
    for path in folder.rglob("*"):
        try:
            if path.is_file() and needle in path.read_bytes():
                found.append(path)
        except OSError:  # a file the server removed meanwhile
            continue
    return found


def _kek() -> dict[str, str]:
    return {"TAVERNKIT_SECRET_KEY": KEK}


async def _turn(client: httpx.AsyncClient, chat: str) -> tuple[int, str]:
    """A turn in ``chat``: the start's status and everything the client was told."""
    started = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
    if started.status_code != 202:
        return started.status_code, started.text
    events = await client.get(started.json()["events"])
    return 202, events.text


async def _save_key_through_a(hosts: Hosts) -> None:
    async with hosts.a.client() as a:
        saved = await a.post(
            "/profiles",
            json={
                "name": "sealed",
                "source": "openai",
                "base_url": hosts.upstream.base_url + "/v1",
                "model": "m1",
                "keys": [SECRET],
                "activate": True,
            },
        )
    assert saved.status_code == 201, saved.text
    assert SECRET not in saved.text


async def test_a_key_saved_through_a_is_used_by_b_on_another_data_dir(hosts: Hosts) -> None:
    hosts.upstream.script(Reply(text="Sealed and delivered."))
    chat = (await hosts.tk.chats.new_chat("Mira")).id
    before = len(hosts.upstream.requests)
    async with hosts.b.client() as b:
        status, told = await _turn(b, chat)
    assert status == 202, told
    events = parse_events(told.encode())
    assert events[-1].type == "done" and events[-1].data["status"] == "completed", told
    assert [r.headers["authorization"] for r in hosts.upstream.requests[before:]] == [
        f"Bearer {SECRET}"
    ]
    # nothing of the key on either host's disk: it is in the database, sealed
    for name in ("a", "b"):
        on_disk = b"".join(p.read_bytes() for p in (hosts.root / name).rglob("*") if p.is_file())
        assert SECRET.encode() not in on_disk


async def test_the_database_holds_the_key_sealed_never_in_plain(hosts: Hosts) -> None:
    conn = await asyncpg.connect(hosts.database)
    try:
        sealed = [r["secret"] for r in await conn.fetch("SELECT secret FROM api_keys")]
        dumped = [
            repr(await conn.fetch(f"SELECT {columns} FROM {table}"))
            for table, columns, _ in COPIED_TABLES
        ]
        await conn.execute("CHECKPOINT")  # every page on disk: the files are what a copy takes
        assert not await asyncio.to_thread(_files_hold, hosts.cluster_data, SECRET.encode())
        # (the scan reads the table's pages: the sealed text is found there)
        assert await asyncio.to_thread(_files_hold, hosts.cluster_data, sealed[0].encode())
        with pytest.raises(asyncpg.CheckViolationError):  # no plaintext gets in
            await conn.execute("UPDATE api_keys SET secret = $1", SECRET)
    finally:
        await conn.close()
    assert sealed and all(s.startswith("tk1:") for s in sealed)
    assert not any(SECRET in text for text in dumped)


async def test_a_process_without_the_secret_key_fails_the_turn_safely(hosts: Hosts) -> None:
    conn = await asyncpg.connect(hosts.database)
    try:
        key_ids = [r["id"] for r in await conn.fetch("SELECT id FROM api_keys")]
    finally:
        await conn.close()
    assert key_ids
    chat = (await hosts.tk.chats.new_chat("Mira")).id
    before = len(hosts.upstream.requests)
    async with hosts.c.client() as c:
        status, told = await _turn(c, chat)
    assert len(hosts.upstream.requests) == before  # nothing was sent without a key
    if status == 202:
        final = parse_events(told.encode())[-1]
        assert final.type in {"error", "done"} and final.data.get("status") != "completed", told
    # it says what the operator must give
    assert "TAVERNKIT_SECRET_KEY" in told, told
    # no secret, no path, no key id, no key-encryption key's id
    assert SECRET not in told and KEK not in told
    assert str(hosts.root) not in told and "/keys" not in told
    assert not any(key_id in told for key_id in key_ids)
    kek_ids = {s.split(":")[1] for s in await _sealed(hosts.database)}
    assert not any(kek_id in told for kek_id in kek_ids)
    assert not re.search(r"\.key\b", told)


async def _sealed(database: str) -> list[str]:
    conn = await asyncpg.connect(database)
    try:
        return [str(r["secret"]) for r in await conn.fetch("SELECT secret FROM api_keys")]
    finally:
        await conn.close()
