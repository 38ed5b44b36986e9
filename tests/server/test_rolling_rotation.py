"""A rolling rotation of the secret key (issue 37) over real ``tavernkit serve`` processes with
data folders of their own on one PostgreSQL database. Mid-step 1 of the procedure: process N is
restarted onto the new key with the old one as previous; process O still runs on the old key
alone. A key saved through either is used by the other (the turn reaches the scripted upstream
with that key): N seals with the old key until the rotation, so O can read what N saved. Then
``tavernkit rotate-secret-key`` (step 2, once every process holds the pair) leaves every secret
under the new key, which N still opens, and what N saves afterwards is sealed with it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from _services import PostgresCluster
from chat._server import HangingServer, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern
from tavernkit.store.secret_key import secret_key_from_text

from ._processes import ServeProcess, start_serve
from ._sse import parse_events

pytestmark = pytest.mark.asyncio(loop_scope="module")

OLD = "old-deployment-kek-Zm9vYmFyYmF6cXV4cXV1eGNvcmdl"
NEW = "new-deployment-kek-YmF6cXV4Zm9vYmFycXV1eGdyYXVs"
THROUGH_NEW = "sk-through-new-Q9g8h7j6k5m4n3p2ZYX"
THROUGH_OLD = "sk-through-old-W8v7u6t5s4r3q2p1ABC"
AFTER = "sk-after-rotation-L1k2j3h4g5f6d7sXY"
_SRC = str(Path(__file__).resolve().parents[2] / "src")


@dataclass
class Deployment:
    #: on the pair: NEW current, OLD previous
    new: ServeProcess
    #: not yet restarted: OLD alone
    old: ServeProcess
    upstream: HangingServer
    tk: Tavern
    database: str
    root: Path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def deployment(
    postgres_cluster: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Deployment]:
    database = await postgres_cluster.create_database()
    root = tmp_path_factory.mktemp("rolling")

    def host(name: str, **keys: str) -> dict[str, str]:
        return {"TAVERNKIT_HOME": str(root / name), **keys}

    pair = {"TAVERNKIT_SECRET_KEY": NEW, "TAVERNKIT_SECRET_KEY_PREVIOUS": OLD}
    try:
        async with HangingServer() as upstream, Tavern(root / "setup", database=database) as tk:
            await stock_world(tk, upstream.base_url)
            new, old = await asyncio.gather(
                start_serve(root / "n", "--database", database, env=host("n", **pair)),
                start_serve(
                    root / "o", "--database", database, env=host("o", TAVERNKIT_SECRET_KEY=OLD)
                ),
            )
            try:
                yield Deployment(new, old, upstream, tk, database, root)
            finally:
                await asyncio.gather(new.stop(), old.stop())
    finally:
        await postgres_cluster.drop_database(database)


async def _save_profile(process: ServeProcess, name: str, secret: str, base_url: str) -> None:
    async with process.client() as client:
        saved = await client.post(
            "/profiles",
            json={
                "name": name,
                "source": "openai",
                "base_url": base_url + "/v1",
                "model": "m1",
                "keys": [secret],
                "activate": True,
            },
        )
    assert saved.status_code == 201, saved.text
    assert secret not in saved.text


async def _turn_uses(deployment: Deployment, process: ServeProcess) -> list[str]:
    """A completed turn through ``process``; the authorization headers the upstream saw."""
    deployment.upstream.script(Reply(text="Sealed and delivered."))
    chat = (await deployment.tk.chats.new_chat("Mira")).id
    before = len(deployment.upstream.requests)
    async with process.client() as client:
        started = await client.post(f"/chats/{chat}/turns", json={"text": "Hello"})
        assert started.status_code == 202, started.text
        told = (await client.get(started.json()["events"])).text
    events = parse_events(told.encode())
    assert events[-1].type == "done" and events[-1].data["status"] == "completed", told
    return [r.headers["authorization"] for r in deployment.upstream.requests[before:]]


async def _sealed_under(database: str) -> set[str]:
    """The ids of the keys the database's secrets are sealed under."""
    conn = await asyncpg.connect(database)
    try:
        rows = await conn.fetch(
            "SELECT secret AS s FROM api_keys WHERE secret <> '' "
            "UNION ALL SELECT sealed AS s FROM store_secrets"
        )
    finally:
        await conn.close()
    return {str(r["s"]).split(":")[1] for r in rows}


async def _rotate(database: str, home: Path) -> str:
    """``tavernkit rotate-secret-key`` run as an operator would, given the pair."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from tavernkit.cli import main; main()",
        "rotate-secret-key",
        "--database",
        database,
        "--home",
        str(home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": _SRC,
            "TAVERNKIT_HOME": str(home),
            "TAVERNKIT_SECRET_KEY": NEW,
            "TAVERNKIT_SECRET_KEY_PREVIOUS": OLD,
        },
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_mid_restart_a_key_saved_through_either_process_is_used_by_the_other(
    deployment: Deployment,
) -> None:
    old_id, new_id = secret_key_from_text(OLD).key_id, secret_key_from_text(NEW).key_id
    # saved through the process on the pair: sealed with the old key, which O holds
    await _save_profile(deployment.new, "via-new", THROUGH_NEW, deployment.upstream.base_url)
    assert await _sealed_under(deployment.database) == {old_id}
    assert await _turn_uses(deployment, deployment.old) == [f"Bearer {THROUGH_NEW}"]
    assert await _turn_uses(deployment, deployment.new) == [f"Bearer {THROUGH_NEW}"]
    # saved through the process still on the old key: the pair opens it
    await _save_profile(deployment.old, "via-old", THROUGH_OLD, deployment.upstream.base_url)
    assert await _turn_uses(deployment, deployment.new) == [f"Bearer {THROUGH_OLD}"]
    assert await _turn_uses(deployment, deployment.old) == [f"Bearer {THROUGH_OLD}"]
    assert new_id not in await _sealed_under(deployment.database)


async def test_after_the_rotation_everything_is_under_the_new_key_and_the_pair_still_works(
    deployment: Deployment,
) -> None:
    # (step 2 comes once every process holds the pair: O is now only a reader to be restarted)
    said = await _rotate(deployment.database, deployment.root / "operator")
    assert "sealed secrets now under the current key" in " ".join(said.split()), said
    assert OLD not in said and NEW not in said
    new_id = secret_key_from_text(NEW).key_id
    assert await _sealed_under(deployment.database) == {new_id}
    assert await _turn_uses(deployment, deployment.new) == [f"Bearer {THROUGH_OLD}"]
    # what N saves now is sealed with the new key: step 3 may drop the old one
    await _save_profile(deployment.new, "after", AFTER, deployment.upstream.base_url)
    assert await _sealed_under(deployment.database) == {new_id}
    assert await _turn_uses(deployment, deployment.new) == [f"Bearer {AFTER}"]
