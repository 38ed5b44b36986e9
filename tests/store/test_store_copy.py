"""``copy-data``: a SQLite home into PostgreSQL and back, nothing lost (every row of every
table, the chats' counters, the key secrets), refused into a database that holds data; and
``migrate``. Against the session's real PostgreSQL cluster."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from _services import PostgresCluster
from tavernkit.cli import app
from tavernkit.errors import Conflict
from tavernkit.models.settings import Settings
from tavernkit.store import KeyState, SqliteStore, open_postgres_store
from tavernkit.store.admin import COPIED_TABLES, copy_store
from tavernkit.store.migrations import MIGRATIONS
from tavernkit.store.sqlite import open_store as open_sqlite_store

SECRET = "sk-Q9f8e7d6c5b4a3210ZYXWVUTSRQ"
CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Ava", "description": "a pilot", "first_mes": "Hi!", "unknown_key": [1]},
}


async def populate(store: SqliteStore) -> None:
    """One of everything the store keeps, for two owners, with the odd cases in it."""
    for owner in ("default", "bob"):
        card = await store.put(
            "character", CARD, owner=owner, blobs={"avatar": b"\x89PNG\x00", "alt": b"\x00\xff"}
        )
        await store.set_blob("character", card.id, "avatar", b"\x89PNG 2", owner=owner)  # in place
        books = [
            await store.put("lorebook", {"name": f"book {i}", "entries": {}}, owner=owner)
            for i in range(3)
        ]
        for book in reversed(books):
            await store.link("character", card.id, "lorebook", "lorebook", book.id, owner=owner)
        await store.put("persona", {"name": "Me", "description": "x"}, owner=owner)
        await store.put("persona", {"name": "Me", "description": "y"}, owner=owner)
        await store.put(
            "persona",
            {"name": "Me", "description": "z"},
            owner=owner,
            id=(await store.list("persona", owner=owner))[0].id,
        )  # revision 2
        await store.put_settings(Settings(), owner=owner)
        await store.set_global_variable("score", {"n": [1, 2.5, None]}, owner=owner)
        key = await store.add_api_key("openai", f"{SECRET}-{owner}", owner=owner, label="w")
        await store.put_key_state(
            KeyState(key, failures=2, last_error_code="quota", uses=7), owner=owner
        )
        header = {"user_name": "You", "character_name": "Ava", "chat_metadata": {"v": {"x": 1}}}
        messages: list[dict[str, Any]] = [
            {
                "name": "Ava",
                "is_user": False,
                "mes": "Hi!",
                "swipes": ["Hi!", "Yo"],
                "swipe_id": 0,
                "swipe_info": [{"send_date": "a"}, {"send_date": "b", "extra": {}}],
            },
            {"name": "You", "is_user": True, "is_system": True, "mes": "hidden \x00 nul"},
            {"name": "Ava", "is_user": False, "mes": "lone \ud83d", "swipes": ["x\udc00"]},
        ]
        chat = await store.create_chat(header, messages, name="c", owner=owner, character=card.id)
        mid = (await store.load_chat(chat.id, owner=owner)).messages[0].id
        swipe = await store.append_swipe(mid, "streaming", complete=False, owner=owner)
        await store.update_swipe_text(mid, swipe, "stream", complete=False, owner=owner)
        await store.create_chat({"chat_metadata": {}}, [], name="empty", owner=owner)
        # memory's vectors, in their insertion order
        vectors = np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32)
        await store.add_vectors(
            f"chat:{chat.id}", "minilm", [(7, "a", 0), (3, "b", 1)], vectors, owner=owner
        )
    # the server's accounts (a user, their API token and browser session)
    user = await store.create_user("Ann", "$argon2id$hash", owner="user:ann", is_admin=True)
    await store.add_token(user.id, "token-hash", label="bot")
    await store.create_session(user.id, "session-hash", expires=datetime(2030, 1, 1, tzinfo=UTC))


async def dump(store: SqliteStore) -> dict[str, Any]:
    """Every copied row of every table, the chats' counters and the key secrets."""
    out: dict[str, Any] = {}
    async with store._read() as db:
        for table, columns, order in COPIED_TABLES:
            rows = await db.execute_fetchall(f"SELECT {columns} FROM {table} ORDER BY {order}")
            out[table] = [tuple(r) for r in rows]
        counters = await db.execute_fetchall(
            "SELECT id, msg_total, msg_hidden, msg_user, msg_hidden_tools FROM chats ORDER BY id"
        )
        out["counters"] = [tuple(r) for r in counters]
    # the sealed secrets are copied as they are (the api_keys rows above); they still open
    out["secrets"] = {
        row[0]: await store.get_api_key_secret(row[0], owner=row[1]) for row in out["api_keys"]
    }
    out["blob order"] = [
        (ref.id, await store.list_blobs("character", ref.id, owner=ref.owner))
        for owner in ("default", "bob")
        for ref in await store.list("character", owner=owner)
    ]
    return out


async def test_sqlite_to_postgresql_and_back_loses_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    lite = await open_sqlite_store(tmp_path / "a" / "tavernkit.db")
    pg = await open_postgres_store(postgres_url, key_dir=tmp_path / "pg-keys")
    back = await open_sqlite_store(tmp_path / "b" / "tavernkit.db")
    try:
        await populate(lite)
        before = await dump(lite)
        report = await copy_store(lite, pg)
        assert report.secrets == 2 and report.rows["messages"] == 6 and report.rows["users"] == 1
        assert await dump(pg) == before
        await copy_store(pg, back)
        assert await dump(back) == before
        # and what the API gives back is the same, down to the partial swipe
        for owner in ("default", "bob"):
            for chat in await lite.list_chats(owner=owner):
                assert await back.load_chat(chat.id, owner=owner) == await lite.load_chat(
                    chat.id, owner=owner
                )
                assert await pg.load_chat(chat.id, owner=owner) == await lite.load_chat(
                    chat.id, owner=owner
                )
        # the copies find the copied text (SQLite's index by its triggers, PostgreSQL's own)
        for store in (lite, pg, back):
            found = await store.search_messages("stream", owner="bob")
            assert [(h.chat_name, h.index, h.snippet) for h in found.hits] == [("c", 0, "stream")]
        # a copy into a store that holds data is refused and changes nothing
        with pytest.raises(Conflict, match="already holds data"):
            await copy_store(lite, pg)
        assert await dump(pg) == before
    finally:
        for s in (lite, pg, back):
            await s.close()


def test_the_cli_copies_a_home_to_postgresql_and_back_and_migrates(
    postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    url = asyncio.run(postgres_cluster.create_database())
    home, other = tmp_path / "home", tmp_path / "other"
    runner = CliRunner()

    async def fill() -> dict[str, Any]:
        home.mkdir()
        async with await open_sqlite_store(home / "tavernkit.db") as s:
            await populate(s)
            return await dump(s)

    async def read(where: Path) -> dict[str, Any]:
        async with await open_sqlite_store(where / "tavernkit.db") as s:
            return await dump(s)

    try:
        before = asyncio.run(fill())
        migrated = runner.invoke(app, ["migrate", "--database", url, "--home", str(home)])
        assert migrated.exit_code == 0, migrated.output
        assert all(name in migrated.output for name, _ in MIGRATIONS)
        to = runner.invoke(app, ["copy-data", "--to", url, "--home", str(home)])
        assert to.exit_code == 0, to.output
        assert "messages: 6" in to.output and "key secrets: 2" in to.output
        back = runner.invoke(app, ["copy-data", "--from", url, "--home", str(other)])
        assert back.exit_code == 0, back.output
        assert asyncio.run(read(other)) == before
        again = runner.invoke(app, ["copy-data", "--to", url, "--home", str(home)])
        assert again.exit_code == 1 and "already holds data" in again.output
        both = runner.invoke(app, ["copy-data", "--home", str(home)])
        assert both.exit_code == 1 and "exactly one" in both.output
        local = runner.invoke(app, ["migrate", "--home", str(other)])
        assert local.exit_code == 0 and "001_initial" in local.output
    finally:
        asyncio.run(postgres_cluster.drop_database(url))
