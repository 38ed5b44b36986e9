"""Key fingerprints are keyed with the install's own secret (issue 34, finding 9): a copy of
the database cannot be checked against a list of keys, yet the same key keeps its fingerprint."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from tavernkit.store import SqliteStore, open_store
from tavernkit.store.key_files import key_dir_for
from tavernkit.store.paths import data_dir
from tavernkit.store.secret_key import GENERATED_KEY_FILE

SECRET = "sk-Q9g8h7j6k5m4n3p2ZYXWVUTSRQ"
UNSALTED = hashlib.sha256(SECRET.encode()).hexdigest()[:12]


async def _fingerprint(store: SqliteStore, key_id: str) -> str:
    return next(k.fingerprint for k in await store.list_api_keys() if k.id == key_id)


async def test_a_fingerprint_is_not_the_keys_unsalted_hash(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    printed = await _fingerprint(store, key_id)
    assert len(printed) == 12 and int(printed, 16) >= 0
    assert printed != UNSALTED
    # the same key again: the same fingerprint (it tells keys apart, stably)
    again = await store.add_api_key("openai", SECRET, label="twice")
    assert await _fingerprint(store, again) == printed
    other = await store.add_api_key("openai", SECRET + "x")
    assert await _fingerprint(store, other) != printed


async def test_two_installs_give_the_same_key_different_fingerprints(
    store: SqliteStore, tmp_path: Path
) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    async with await open_store(tmp_path / "second" / "other.db") as second:
        other_id = await second.add_api_key("openai", SECRET)
        assert await _fingerprint(second, other_id) != await _fingerprint(store, key_id)


async def test_the_fingerprint_stays_across_restarts(db_path: Path) -> None:
    async with await open_store(db_path) as store:
        key_id = await store.add_api_key("openai", SECRET)
        printed = await _fingerprint(store, key_id)
    async with await open_store(db_path) as store:
        assert await _fingerprint(store, key_id) == printed
    # the install's secret is in the database, sealed like the keys (no file beside it)
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT name, sealed FROM store_secrets").fetchall()
    db.close()
    assert [name for name, _ in rows] == ["fingerprint"]
    assert rows[0][1].startswith("tk1:")
    assert not key_dir_for(db_path).exists()


async def test_unsalted_fingerprints_of_older_versions_are_replaced_on_open(
    db_path: Path,
) -> None:
    async with await open_store(db_path) as store:
        key_id = await store.add_api_key("openai", SECRET)
        keyed = await _fingerprint(store, key_id)
    with sqlite3.connect(db_path) as db:  # as an older tavernkit wrote it
        db.execute("UPDATE api_keys SET fingerprint = ?", (UNSALTED,))
    db.close()
    async with await open_store(db_path) as store:
        assert await _fingerprint(store, key_id) == keyed
    with sqlite3.connect(db_path) as db:
        stored = db.execute("SELECT fingerprint FROM api_keys").fetchall()
    db.close()
    assert stored == [(keyed,)]


async def test_a_store_without_keys_makes_no_secret(db_path: Path) -> None:
    async with await open_store(db_path):
        pass
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT count(*) FROM store_secrets").fetchone() == (0,)
    db.close()
    assert not (data_dir() / GENERATED_KEY_FILE).exists()
