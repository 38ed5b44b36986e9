"""What is PostgreSQL's own: several processes (here: several stores, each its own pool of
connections) writing one database at once, its migrations, where its key secrets live, and
the values its text type cannot hold. Against the session's real cluster (tests/_services.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from _services import PostgresCluster
from tavernkit.errors import FormatError, Overloaded, RateLimited, StoreError
from tavernkit.generation.keys import KeyPool, PoolKey, StoreCooldownStore
from tavernkit.store import PostgresStore, SqliteStore, open_postgres_store, open_store
from tavernkit.store.key_files import KeyFiles
from tavernkit.store.migrations import MIGRATIONS
from tavernkit.store.pg_migrations import PG_MIGRATIONS
from tavernkit.store.sqlite import open_store as open_sqlite_store

SECRET = "sk-Q9f8e7d6c5b4a3210ZYXWVUTSRQ"
HEADER = {"user_name": "You", "character_name": "Ava", "chat_metadata": {}}


def bot(text: str) -> dict[str, object]:
    return {"name": "Ava", "is_user": False, "mes": text, "swipes": [text], "swipe_id": 0}


@pytest.fixture
async def two(postgres_url: str, tmp_path: Path) -> AsyncIterator[tuple[PostgresStore, ...]]:
    """Two "processes": two stores, each with its own pool, on one database and key folder."""
    keys = tmp_path / "keys"
    a = await open_postgres_store(postgres_url, key_dir=keys)
    b = await open_postgres_store(postgres_url, key_dir=keys)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_two_processes_appending_to_one_chat_get_one_gapless_order(
    two: tuple[PostgresStore, ...],
) -> None:
    a, b = two
    chat = await a.create_chat(HEADER, [bot("hi")], name="c")
    writes = [
        store.append_message(chat.id, bot(f"{name}{i}"))
        for i in range(15)
        for name, store in (("a", a), ("b", b))
    ]
    stored = await asyncio.gather(*writes)
    assert sorted(m.position for m in stored) == list(range(1, 31))
    loaded = await b.load_chat(chat.id)
    assert [m.position for m in loaded.messages] == list(range(31))
    assert loaded.info.message_count == 31  # the trigger's counter saw every append
    window = await a.load_chat_window(chat.id, last=5)
    assert [m.position for m in window.tail] == [26, 27, 28, 29, 30]
    assert [m.position for m in window.head] == [0]  # up to the first visible message
    assert window.gap.total == 25


async def test_two_processes_adding_swipes_to_one_message_lose_none(
    two: tuple[PostgresStore, ...],
) -> None:
    a, b = two
    chat = await a.create_chat(HEADER, [bot("first")], name="c")
    mid = (await a.load_chat(chat.id)).messages[0].id
    indexes = await asyncio.gather(
        *(s.append_swipe(mid, f"take {i}") for i in range(10) for s in (a, b))
    )
    assert sorted(indexes) == list(range(1, 21))
    message = await b.get_message(mid)
    assert len(message.data["swipes"]) == 21


async def test_revisions_count_every_write_of_every_process(
    two: tuple[PostgresStore, ...], postgres_url: str
) -> None:
    a, b = two
    ref = await a.put("persona", {"name": "P", "description": "0"})
    first = await b.get_shared("persona", ref.id)
    await asyncio.gather(
        *(
            s.put("persona", {"name": "P", "description": str(i)}, id=ref.id)
            for i in range(1, 11)
            for s in (a, b)
        )
    )
    conn = await asyncpg.connect(postgres_url)
    try:
        revision = await conn.fetchval("SELECT revision FROM records WHERE id = $1", ref.id)
    finally:
        await conn.close()
    assert revision == 21
    # b's shared model is replaced once a's writes bump the revision
    assert await b.get_shared("persona", ref.id) is not first


async def test_processes_starting_at_once_migrate_once(postgres_url: str, tmp_path: Path) -> None:
    stores = await asyncio.gather(
        *(open_postgres_store(postgres_url, key_dir=tmp_path) for _ in range(4))
    )
    for s in stores:
        await s.close()
    conn = await asyncpg.connect(postgres_url)
    try:
        names = [r[0] for r in await conn.fetch("SELECT name FROM _migrations ORDER BY name")]
    finally:
        await conn.close()
    # the same names, in the same order, as the SQLite store's
    assert names == [name for name, _ in PG_MIGRATIONS] == [name for name, _ in MIGRATIONS]


async def test_a_database_from_a_newer_version_is_refused(
    postgres_url: str, tmp_path: Path
) -> None:
    await (await open_postgres_store(postgres_url, key_dir=tmp_path)).close()
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("INSERT INTO _migrations VALUES ('999_future', 'x')")
    finally:
        await conn.close()
    with pytest.raises(StoreError, match="newer tavernkit"):
        await open_postgres_store(postgres_url, key_dir=tmp_path)


async def test_secrets_are_sealed_in_the_database_never_in_plain(
    postgres_url: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    async with await open_postgres_store(postgres_url, key_dir=keys) as s:
        key_id = await s.add_api_key("openai", SECRET, label="work")
        assert await s.get_api_key_secret(key_id) == SECRET
        assert SECRET not in repr(s)
    assert not keys.exists()  # no file on this host: any host's process can use the key
    conn = await asyncpg.connect(postgres_url)
    try:
        dump = await conn.fetchval(
            "SELECT string_agg(t::text, ' ') FROM (SELECT * FROM api_keys) t"
        )
        assert key_id in dump and "tk1:" in dump and SECRET not in dump
        # and the database itself refuses a plaintext in that column
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute("UPDATE api_keys SET secret = $1", SECRET)
    finally:
        await conn.close()


async def test_key_files_of_an_older_version_move_into_postgresql_on_open(
    postgres_url: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    async with await open_postgres_store(postgres_url, key_dir=keys) as s:
        key_id = await s.add_api_key("openai", SECRET, label="work")
    conn = await asyncpg.connect(postgres_url)
    try:  # as the version before 015 left it: the secret in a file, the column empty
        await conn.execute("UPDATE api_keys SET secret = ''")
    finally:
        await conn.close()
    KeyFiles(keys).write(key_id, SECRET)
    async with await open_postgres_store(postgres_url, key_dir=keys) as s:
        assert await s.get_api_key_secret(key_id) == SECRET
    assert not keys.exists()
    async with await open_postgres_store(postgres_url, key_dir=keys) as s:  # once only
        assert await s.adopt_key_files() == 0
        assert await s.get_api_key_secret(key_id) == SECRET


async def test_nul_characters_round_trip_in_messages_and_fail_cleanly_in_names(
    postgres_url: str, tmp_path: Path
) -> None:
    async with await open_postgres_store(postgres_url, key_dir=tmp_path) as s:
        odd = {**bot("a\x00b"), "swipes": ["a\x00b", "c\x00"]}
        chat = await s.create_chat(HEADER, [odd], name="c")
        assert (await s.load_chat(chat.id)).messages[0].data == odd
        with pytest.raises(FormatError):
            await s.create_chat(HEADER, [], name="bad \x00 name")
        with pytest.raises(FormatError) as info:
            await s.put("persona", {"name": f"x{SECRET}\ud800"})
        assert SECRET not in str(info.value)  # the driver's message quotes the value


async def test_a_cancelled_write_stores_nothing_and_the_next_one_succeeds(
    postgres_url: str, tmp_path: Path
) -> None:
    async with await open_postgres_store(postgres_url, key_dir=tmp_path) as s:
        chat = await s.create_chat(HEADER, [bot("hi")], name="c")
        many = [bot(f"m{i}") for i in range(3000)]
        task = asyncio.create_task(s.create_chat(HEADER, many, name="big"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [c.name for c in await s.list_chats()] == ["c"]
        await s.append_message(chat.id, bot("after"))
        assert (await s.get_chat_info(chat.id)).message_count == 2


async def test_open_store_picks_the_backend_from_the_target(
    postgres_cluster: PostgresCluster, postgres_url: str, tmp_path: Path
) -> None:
    async with await open_store(postgres_url) as pg:  # type: ignore[attr-defined]
        assert isinstance(pg, PostgresStore)
    async with await open_store(tmp_path / "x.db") as lite:  # type: ignore[attr-defined]
        assert isinstance(lite, SqliteStore) and not isinstance(lite, PostgresStore)
    secret_url = f"postgresql://tk:{SECRET}@127.0.0.1:{postgres_cluster.port}/nowhere"
    with pytest.raises(StoreError) as info:
        await open_store(secret_url)
    assert SECRET not in str(info.value) and "***" in str(info.value)


async def test_the_tables_mirror_sqlites_column_for_column(
    postgres_url: str, tmp_path: Path
) -> None:
    await (await open_postgres_store(postgres_url, key_dir=tmp_path)).close()
    async with await open_sqlite_store(tmp_path / "t.db") as lite, lite._read() as db:
        tables = [
            r[0]
            for r in await db.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        sqlite_columns = {
            t: [r[1] for r in await db.execute_fetchall(f"PRAGMA table_info({t})")] for t in tables
        }
    conn = await asyncpg.connect(postgres_url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        )
    finally:
        await conn.close()
    pg_columns: dict[str, list[str]] = {}
    for table, column in rows:
        pg_columns.setdefault(table, []).append(column)
    # SQLite's message search is an FTS5 table (and the shadow tables FTS5 keeps), where
    # PostgreSQL has an index on messages
    search = [t for t in sqlite_columns if t.startswith("message_search")]
    assert "message_search" in search
    for table in search:
        del sqlite_columns[table]
    # record_blobs.seq stands in for SQLite's rowid
    assert pg_columns.pop("record_blobs") == [*sqlite_columns.pop("record_blobs"), "seq"]
    assert pg_columns == sqlite_columns


async def test_a_stored_keys_cooldown_seen_by_one_process_benches_it_for_another(
    two: tuple[PostgresStore, ...],
) -> None:
    a, b = two
    ids = [await a.add_api_key("openai", f"{SECRET}{i}", owner="ann") for i in range(2)]

    def pool(store: PostgresStore, model: str = "") -> KeyPool:
        async def secret(key: PoolKey) -> str:
            return await store.get_api_key_secret(key.key_id, owner="ann")

        keys = [PoolKey(i) for i in ids]
        return KeyPool(
            "ann",
            "openai",
            keys,
            load_secret=secret,
            store=StoreCooldownStore(store),
            clock=time.time,
            model=model,
        )

    first = await pool(a).select()
    assert first is not None and first.key_id == ids[0]
    await pool(a).record_failure(first, RateLimited("slow down", status=429))
    other = await pool(b).select()
    assert other is not None and other.key_id == ids[1]
    assert await pool(b).secret(other) == f"{SECRET}1"
    # a rest for one model (010_key_rests): the other model still gets the key
    rested = await pool(a, "model-a").record_failure(first, Overloaded("down", status=529))
    assert rested == 300
    assert (await pool(b, "model-a").select()).key_id == ids[1]  # type: ignore[union-attr]
    assert (await pool(b, "model-b").select({ids[1]})).key_id == ids[0]  # type: ignore[union-attr]
    state = await b.get_key_state(ids[0], owner="ann", model="model-a")
    assert state.last_error_code == "overloaded" and state.cooldown_until is not None


async def test_streaming_swiping_and_appending_at_once_across_processes(
    two: tuple[PostgresStore, ...],
) -> None:
    a, b = two
    chat = await a.create_chat(HEADER, [bot("first")], name="c")
    mid = (await a.load_chat(chat.id)).messages[0].id

    async def stream() -> None:
        for i in range(30):
            await a.update_swipe_text(mid, 0, "x" * i, complete=i == 29)

    async def swipe() -> None:
        for i in range(10):
            await b.append_swipe(mid, f"take {i}", activate=False)

    async def append() -> None:
        for i in range(10):
            await b.append_message(chat.id, bot(f"later {i}"))

    await asyncio.gather(stream(), swipe(), append(), stream())
    loaded = await a.load_chat(chat.id)
    first = loaded.messages[0]
    assert first.data["swipes"] == ["x" * 29] + [f"take {i}" for i in range(10)]
    assert first.data["mes"] == "x" * 29 and first.partial_swipes == ()
    assert [m.position for m in loaded.messages] == list(range(11))
    assert loaded.info.message_count == 11
