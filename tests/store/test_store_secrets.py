"""API keys: the secret comes back from one call only; key-pool state carries none; the
database holds it sealed with the secret key (issue 37), never in plain, and a wrong or missing
key, a moved sealed secret, a rotation and older versions' key files all behave."""

from __future__ import annotations

import re
import sqlite3
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from store._before import migrations_before
from tavernkit.errors import NotFound, SecretKeyError, StoreError
from tavernkit.store import KeyState, SqliteStore, open_store
from tavernkit.store.key_files import KeyFiles, key_dir_for, keyed_fingerprint
from tavernkit.store.migrations import MIGRATIONS, apply_migrations
from tavernkit.store.secret_key import (
    GENERATED_KEY_FILE,
    PREVIOUS_SECRET_KEY_ENV,
    PREVIOUS_SECRET_KEY_FILE_ENV,
    SECRET_KEY_ENV,
    SECRET_KEY_FILE_ENV,
    SecretKeySource,
    api_key_binding,
    check_secret_key_settings,
    seal,
    secret_key_from_text,
)
from tavernkit.store.sqlite_thread import connect as connect_sqlite

# no run of 4 hex digits in it: a random key id or fingerprint (hex) must not look like a leak
SECRET = "sk-Q9g8h7j6k5m4n3p2ZYXWVUTSRQ"
#: two deployments' key-encryption keys
KEK = "kek-one-Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"
OTHER_KEK = "kek-two-YmF6cXV4Zm9vYmFycXV1eGdyYXVsdGNvcmdl"


async def test_secret_is_returned_by_get_api_key_secret_only(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET, label="work")
    other = await store.add_api_key("openai", SECRET + "2", label="home")
    await store.add_api_key("claude", "sk-ant-xyz", label="c")

    keys = await store.list_api_keys("openai")
    assert [(k.id, k.label, k.provider) for k in keys] == [
        (key_id, "work", "openai"),
        (other, "home", "openai"),
    ]
    assert len(await store.list_api_keys()) == 3
    # Neither the secret nor any 4+ character piece of it shows in a listing or its repr.
    shown = repr(keys) + str(keys) + repr(store)
    for i in range(len(SECRET) - 3):
        assert SECRET[i : i + 4] not in shown
    assert keys[0].fingerprint != keys[1].fingerprint

    assert await store.get_api_key_secret(key_id) == SECRET


async def test_keys_are_scoped_by_owner(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET, owner="alice")
    assert await store.list_api_keys(owner="bob") == []
    with pytest.raises(NotFound) as info:
        await store.get_api_key_secret(key_id, owner="bob")
    assert SECRET not in str(info.value)
    with pytest.raises(NotFound):
        await store.delete_api_key(key_id, owner="bob")
    with pytest.raises(NotFound):
        await store.get_key_state(key_id, owner="bob")


async def test_bad_keys_are_refused_without_echoing_them(store: SqliteStore) -> None:
    with pytest.raises(StoreError) as info:
        await store.add_api_key("", SECRET)
    assert SECRET not in str(info.value)
    with pytest.raises(StoreError):
        await store.add_api_key("openai", "   ")


async def test_trace_keeps_no_sql_text(store: SqliteStore) -> None:
    await store.add_api_key("openai", SECRET + "0")  # the first key also makes the install's
    async with store.trace() as stats:
        await store.add_api_key("openai", SECRET)
    # one INSERT (SQLite's trace also counts the step of the trigger that lets no plaintext in)
    assert stats.changes == 1 and stats.statements <= 2
    assert SECRET not in repr(stats)


def _db_bytes(db_path: Path) -> bytes:
    files = [db_path, db_path.with_name(db_path.name + "-wal")]
    return b"".join(f.read_bytes() for f in files if f.exists())


async def test_the_secret_is_sealed_in_the_database_never_in_plain(
    store: SqliteStore, db_path: Path
) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    await store.put(
        "connection_profile",
        {"name": "p", "credentials": [{"key_id": key_id, "label": "work"}]},
    )
    await store.put_key_state(KeyState(key_id, failures=1, last_error_code="auth"))
    assert await store.get_api_key_secret(key_id) == SECRET
    await store.close()
    with sqlite3.connect(db_path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        holding = [t for t in tables if SECRET in repr(db.execute(f"SELECT * FROM {t}").fetchall())]
        sealed = db.execute("SELECT secret FROM api_keys WHERE id = ?", (key_id,)).fetchone()[0]
    db.close()
    assert holding == []
    assert SECRET.encode() not in _db_bytes(db_path)
    assert sealed.startswith("tk1:") and len(sealed) > len(SECRET)
    # nothing beside the database any more: a copy of the file is a copy of the keys, sealed
    assert not key_dir_for(db_path).exists()


async def test_no_plaintext_column_can_be_written(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    with pytest.raises(StoreError):
        async with store._write() as db:
            await db.execute("UPDATE api_keys SET secret = ? WHERE id = ?", (SECRET, key_id))
    assert await store.get_api_key_secret(key_id) == SECRET


async def test_a_sealed_secret_moved_to_another_row_does_not_open(store: SqliteStore) -> None:
    first = await store.add_api_key("openai", SECRET)
    second = await store.add_api_key("openai", "sk-other-key-of-another-row")
    async with store._write() as db:
        await db.execute(
            "UPDATE api_keys SET secret = (SELECT secret FROM api_keys WHERE id = ?) WHERE id = ?",
            (first, second),
        )
    with pytest.raises(SecretKeyError, match="altered or copied") as info:
        await store.get_api_key_secret(second)
    said = str(info.value)
    assert SECRET not in said and first not in said and second not in said


async def test_a_key_row_given_to_another_owner_behind_the_stores_back_does_not_open(
    store: SqliteStore,
) -> None:
    key_id = await store.add_api_key("openai", SECRET, owner="alice")
    async with store._write() as db:
        await db.execute("UPDATE api_keys SET owner = 'mallory' WHERE id = ?", (key_id,))
    with pytest.raises(SecretKeyError, match="altered or copied") as info:
        await store.get_api_key_secret(key_id, owner="mallory")
    assert SECRET not in str(info.value) and key_id not in str(info.value)


def _leaks(said: str, *, key_ids: list[str], tmp_path: Path) -> list[str]:
    """What of the secret, the key ids, the key-encryption keys' ids and paths ``said`` shows."""
    found = [piece for piece in [SECRET, *key_ids, str(tmp_path), "/"] if piece in said]
    found += [run for run in re.findall(r"[0-9a-f]{12}", said)]
    return found


async def test_another_secret_key_cannot_open_the_keys_and_says_so_safely(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, KEK)
    async with await open_store(db_path) as store:
        key_id = await store.add_api_key("openai", SECRET)
    monkeypatch.setenv(SECRET_KEY_ENV, OTHER_KEK)
    async with await open_store(db_path) as store:
        assert [k.id for k in await store.list_api_keys()] == [key_id]  # listing needs no key
        with pytest.raises(SecretKeyError, match=SECRET_KEY_ENV) as info:
            await store.get_api_key_secret(key_id)
        assert _leaks(str(info.value), key_ids=[key_id], tmp_path=tmp_path) == []
        # nor may it seal a key of its own next to the deployment's
        with pytest.raises(SecretKeyError):
            await store.add_api_key("openai", "sk-sealed-with-the-wrong-key")
    # a process given no key at all makes its own (a single host's) and is told the same
    monkeypatch.delenv(SECRET_KEY_ENV)
    monkeypatch.setenv("TAVERNKIT_HOME", str(tmp_path / "another-host"))
    async with await open_store(db_path) as store:
        with pytest.raises(SecretKeyError, match=SECRET_KEY_ENV) as info:
            await store.get_api_key_secret(key_id)
        assert _leaks(str(info.value), key_ids=[key_id], tmp_path=tmp_path) == []
    monkeypatch.setenv(SECRET_KEY_ENV, KEK)
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret(key_id) == SECRET


async def test_a_single_host_key_is_made_private_in_the_data_dir_on_first_use(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("TAVERNKIT_HOME", str(home))
    async with await open_store(db_path) as store:
        assert not (home / GENERATED_KEY_FILE).exists()  # no key stored: none made
        key_id = await store.add_api_key("openai", SECRET)
    made = home / GENERATED_KEY_FILE
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert len(made.read_text()) >= 32
    # its text is what a second host is given
    monkeypatch.setenv(SECRET_KEY_ENV, made.read_text())
    monkeypatch.setenv("TAVERNKIT_HOME", str(tmp_path / "second-host"))
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret(key_id) == SECRET


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({SECRET_KEY_ENV: "short"}, "at least 32 characters"),
        ({SECRET_KEY_ENV: KEK, SECRET_KEY_FILE_ENV: "/nonexistent"}, "give one"),
        ({SECRET_KEY_FILE_ENV: "/nonexistent/secret.key"}, "cannot be read"),
    ],
)
def test_an_unusable_secret_key_setting_is_a_typed_error_without_the_path(
    env: dict[str, str], match: str
) -> None:
    with pytest.raises(SecretKeyError, match=match) as info:
        check_secret_key_settings(env)
    assert "/nonexistent" not in str(info.value) and KEK not in str(info.value)


async def test_a_key_file_names_the_key(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "kek"
    key_file.write_text(KEK + "\n")
    monkeypatch.setenv(SECRET_KEY_FILE_ENV, str(key_file))
    async with await open_store(db_path) as store:
        key_id = await store.add_api_key("openai", SECRET)
    monkeypatch.delenv(SECRET_KEY_FILE_ENV)
    monkeypatch.setenv(SECRET_KEY_ENV, KEK)  # the same key, given the other way
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret(key_id) == SECRET


async def test_rotation_seals_every_secret_again_in_one_go(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, KEK)
    store.use_secret_keys(SecretKeySource())
    ids = [await store.add_api_key("openai", f"{SECRET}{n}") for n in range(3)]
    printed = [k.fingerprint for k in await store.list_api_keys()]
    new = secret_key_from_text(OTHER_KEK)
    # a wrong current key: refused, nothing changed
    store.use_secret_keys(SecretKeySource(secret_key_from_text("w" * 40)))
    with pytest.raises(SecretKeyError, match="nothing was changed") as info:
        await store.rotate_secret_key(new)
    assert SECRET not in str(info.value)
    store.use_secret_keys(SecretKeySource(secret_key_from_text(KEK)))
    assert [await store.get_api_key_secret(i) for i in ids] == [f"{SECRET}{n}" for n in range(3)]

    assert await store.rotate_secret_key(new) == 4  # three keys and the fingerprint secret
    assert [await store.get_api_key_secret(i) for i in ids] == [f"{SECRET}{n}" for n in range(3)]
    store.use_secret_keys(SecretKeySource(secret_key_from_text(KEK)))
    with pytest.raises(SecretKeyError):
        await store.get_api_key_secret(ids[0])
    store.use_secret_keys(SecretKeySource(new))
    assert await store.get_api_key_secret(ids[2]) == f"{SECRET}2"
    # fingerprints stay, and a key added after is printed as before
    assert [k.fingerprint for k in await store.list_api_keys()] == printed
    again = await store.add_api_key("openai", f"{SECRET}0")
    assert next(k.fingerprint for k in await store.list_api_keys() if k.id == again) == printed[0]


async def test_a_database_copied_elsewhere_keeps_its_keys_under_the_same_secret_key(
    store: SqliteStore, db_path: Path, tmp_path: Path
) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    await store.close()
    copy = tmp_path / "elsewhere" / "copy.db"
    copy.parent.mkdir()
    with sqlite3.connect(db_path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    async with await open_store(copy) as moved:
        assert await moved.get_api_key_secret(key_id) == SECRET


async def _old_database(db_path: Path) -> None:
    """A database as the version before 015 left it: key rows with empty secrets."""
    conn = await connect_sqlite(db_path, isolation_level=None)
    await conn.execute("PRAGMA journal_mode=WAL")
    await apply_migrations(
        conn, now=lambda: datetime.now(UTC), migrations=migrations_before("015_sealed_key_secrets")
    )
    await conn.close()


async def test_key_files_of_older_versions_move_into_the_database_once(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _old_database(db_path)
    folder = key_dir_for(db_path)
    files = KeyFiles(folder)
    install = files.fingerprint_secret()
    files.write("k1", SECRET)
    files.write("k2", SECRET + "2")
    with sqlite3.connect(db_path) as db:
        for key_id, secret in (("k1", SECRET), ("k2", SECRET + "2")):
            db.execute(
                "INSERT INTO api_keys (id, owner, provider, label, secret, fingerprint, created) "
                "VALUES (?, 'default', 'openai', 'w', '', ?, '2025-01-01T00:00:00+00:00')",
                (key_id, keyed_fingerprint(install, secret)),
            )
    db.close()
    monkeypatch.setenv(SECRET_KEY_ENV, KEK)
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret("k1") == SECRET
        assert await store.get_api_key_secret("k2") == SECRET + "2"
        # the install's fingerprint secret came along: fingerprints did not change
        assert {k.fingerprint for k in await store.list_api_keys()} == {
            keyed_fingerprint(install, SECRET),
            keyed_fingerprint(install, SECRET + "2"),
        }
    assert not folder.exists()
    assert SECRET.encode() not in _db_bytes(db_path)
    async with await open_store(db_path) as store:  # again: nothing left to do, nothing lost
        assert await store.adopt_key_files() == 0
        assert await store.get_api_key_secret("k1") == SECRET


async def test_migration_003_moves_stored_secrets_out_of_the_database(db_path: Path) -> None:
    old = MIGRATIONS[:2]
    conn = await connect_sqlite(db_path, isolation_level=None)
    await conn.execute("PRAGMA journal_mode=WAL")
    await apply_migrations(conn, now=lambda: datetime.now(UTC), migrations=old)
    await conn.execute(
        "INSERT INTO api_keys (id, owner, provider, label, secret, fingerprint, created) "
        "VALUES ('k1', 'default', 'openai', 'work', ?, 'f', '2025-01-01T00:00:00+00:00')",
        (SECRET,),
    )
    await conn.close()
    assert SECRET.encode() in _db_bytes(db_path)

    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret("k1") == SECRET
        await store.put_key_state(KeyState("k1", failures=2, last_error_code="rate_limit"))
    assert SECRET.encode() not in _db_bytes(db_path)
    assert not key_dir_for(db_path).exists()  # through a file, sealed into its row
    # opening again changes nothing
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret("k1") == SECRET
        assert (await store.get_key_state("k1")).failures == 2


async def test_key_pool_state_round_trip_and_cascade(store: SqliteStore) -> None:
    key_id = await store.add_api_key("openai", SECRET)
    assert await store.get_key_state(key_id) == KeyState(key_id=key_id)
    until = datetime(2025, 6, 1, 12, 30, tzinfo=UTC)
    state = KeyState(key_id, cooldown_until=until, failures=3, last_error_code="rate_limit")
    await store.put_key_state(state)
    assert await store.get_key_state(key_id) == state
    await store.put_key_state(KeyState(key_id, failures=0))
    assert await store.get_key_state(key_id) == KeyState(key_id)
    with pytest.raises(NotFound):
        await store.put_key_state(KeyState("missing"))
    await store.delete_api_key(key_id)
    with pytest.raises(NotFound):
        await store.get_key_state(key_id)
    with pytest.raises(NotFound):
        await store.get_api_key_secret(key_id)


# -- a rolling rotation: the new key as current, the old one as previous ------------------------
def _pair() -> SecretKeySource:
    """A process restarted onto the new key (OTHER_KEK) with the old one (KEK) as previous."""
    return SecretKeySource(secret_key_from_text(OTHER_KEK), secret_key_from_text(KEK))


def _old_only() -> SecretKeySource:
    """A process not yet restarted: the old key alone."""
    return SecretKeySource(secret_key_from_text(KEK))


def test_a_process_with_the_pair_opens_secrets_sealed_under_either_key() -> None:
    binding = api_key_binding("alice", "k1")
    old = seal(secret_key_from_text(KEK), b"sealed-old", binding=binding)
    new = seal(secret_key_from_text(OTHER_KEK), b"sealed-new", binding=binding)
    pair = _pair()
    assert pair.open(old, binding=binding) == b"sealed-old"
    assert pair.open(new, binding=binding) == b"sealed-new"
    with pytest.raises(SecretKeyError):
        _old_only().open(new, binding=binding)
    with pytest.raises(SecretKeyError, match="altered"):  # bound to another row: either key
        pair.open(old, binding=api_key_binding("alice", "k2"))


async def test_before_the_rotation_the_pair_seals_with_the_old_key_so_old_processes_read_it(
    store: SqliteStore,
) -> None:
    store.use_secret_keys(_old_only())
    first = await store.add_api_key("openai", f"{SECRET}0")
    printed = (await store.list_api_keys())[0].fingerprint
    # step 1: this process restarted onto the pair; another still runs on the old key alone
    store.use_secret_keys(_pair())
    saved = await store.add_api_key("openai", f"{SECRET}0")
    store.use_secret_keys(_old_only())
    assert await store.get_api_key_secret(saved) == f"{SECRET}0"
    fingerprints = {k.id: k.fingerprint for k in await store.list_api_keys()}
    assert fingerprints[saved] == printed == fingerprints[first]


async def test_after_the_rotation_the_pair_seals_with_the_new_key_and_the_old_one_can_go(
    store: SqliteStore,
) -> None:
    store.use_secret_keys(_old_only())
    ids = [await store.add_api_key("openai", f"{SECRET}{n}") for n in range(2)]
    store.use_secret_keys(_pair())
    ids.append(await store.add_api_key("openai", f"{SECRET}2"))  # sealed with the old key
    assert await store.rotate_secret_key() == 4  # three keys and the fingerprint secret
    ids.append(await store.add_api_key("openai", f"{SECRET}3"))  # now with the new key
    assert await store.rotate_secret_key() == 0  # nothing left under the old key
    # step 3: the previous key dropped; every secret opens with the new key alone
    store.use_secret_keys(SecretKeySource(secret_key_from_text(OTHER_KEK)))
    assert [await store.get_api_key_secret(i) for i in ids] == [f"{SECRET}{n}" for n in range(4)]
    store.use_secret_keys(_old_only())
    with pytest.raises(SecretKeyError):
        await store.get_api_key_secret(ids[3])


async def test_a_secret_no_given_key_opens_says_so_without_a_path_or_key_id(
    store: SqliteStore, tmp_path: Path
) -> None:
    store.use_secret_keys(SecretKeySource(secret_key_from_text("w" * 40)))
    key_id = await store.add_api_key("openai", SECRET)
    store.use_secret_keys(_pair())
    with pytest.raises(SecretKeyError, match="previous") as info:
        await store.get_api_key_secret(key_id)
    said = str(info.value)
    ids = [secret_key_from_text(t).key_id for t in (KEK, OTHER_KEK, "w" * 40)]
    assert _leaks(said, key_ids=[key_id, *ids], tmp_path=tmp_path) == []
    with pytest.raises(SecretKeyError, match="nothing was changed"):
        await store.rotate_secret_key()
    store.use_secret_keys(SecretKeySource(secret_key_from_text("w" * 40)))
    assert await store.get_api_key_secret(key_id) == SECRET


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({PREVIOUS_SECRET_KEY_ENV: KEK}, "without a current one"),
        ({SECRET_KEY_ENV: KEK, PREVIOUS_SECRET_KEY_ENV: "short"}, "at least 32 characters"),
        (
            {SECRET_KEY_ENV: KEK, PREVIOUS_SECRET_KEY_ENV: KEK, PREVIOUS_SECRET_KEY_FILE_ENV: "/x"},
            "give one",
        ),
        (
            {SECRET_KEY_ENV: KEK, PREVIOUS_SECRET_KEY_FILE_ENV: "/nonexistent/old.key"},
            "--previous-secret-key-file",
        ),
    ],
)
def test_an_unusable_previous_key_setting_is_a_typed_error_without_the_path(
    env: dict[str, str], match: str
) -> None:
    with pytest.raises(SecretKeyError, match=match) as info:
        check_secret_key_settings(env)
    assert "/nonexistent" not in str(info.value) and KEK not in str(info.value)


async def test_the_previous_key_is_read_from_the_environment(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, KEK)
    async with await open_store(db_path) as store:
        key_id = await store.add_api_key("openai", SECRET)
    old_file = tmp_path / "old.key"
    old_file.write_text(KEK + "\n")
    monkeypatch.setenv(SECRET_KEY_ENV, OTHER_KEK)
    monkeypatch.setenv(PREVIOUS_SECRET_KEY_FILE_ENV, str(old_file))
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret(key_id) == SECRET
    monkeypatch.delenv(PREVIOUS_SECRET_KEY_FILE_ENV)
    monkeypatch.setenv(PREVIOUS_SECRET_KEY_ENV, KEK)
    async with await open_store(db_path) as store:
        assert await store.get_api_key_secret(key_id) == SECRET


async def test_a_hand_over_before_the_rotation_seals_for_the_receiver_with_the_old_key(
    store: SqliteStore,
) -> None:
    store.use_secret_keys(_old_only())
    await store.add_api_key("openai", f"{SECRET}ada", owner="ada")
    bob = await store.create_user("bob", "$argon2id$h", owner="bob")
    ada = await store.create_user("ada", "$argon2id$h", owner="ada")
    key_id = await store.add_api_key("openai", SECRET, owner="bob")
    # a process on the pair hands bob's data over: a process on the old key still opens it
    store.use_secret_keys(_pair())
    await store.delete_user(bob.id, hand_over_to=ada.id)
    store.use_secret_keys(_old_only())
    assert await store.get_api_key_secret(key_id, owner="ada") == SECRET
