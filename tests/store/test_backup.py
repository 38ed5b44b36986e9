"""Backups: a verified snapshot with a manifest, restored table by table without a loss on
SQLite and PostgreSQL (key secrets sealed, byte for byte, never in plain; 0600), a damaged or
unfinished backup found by the check, gaps in a schedule, a restore into a home that holds data
refused, retention; and the CLI over all of it. Real SQLite files and the session's real
PostgreSQL cluster."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_store_copy import dump, populate
from typer.testing import CliRunner

from tavernkit import BackupError, HomeNotEmpty
from tavernkit.cli import app
from tavernkit.store import open_postgres_store
from tavernkit.store.backup import DATA_TABLES, make_backup
from tavernkit.store.backup_check import check_backup, check_backups, prune_backups
from tavernkit.store.backup_manifest import MANIFEST_NAME, read_manifest, sha256_of
from tavernkit.store.key_files import KeyFiles
from tavernkit.store.migrations import MIGRATIONS
from tavernkit.store.restore import restore_backup
from tavernkit.store.sqlite import SqliteStore
from tavernkit.store.sqlite import open_store as open_sqlite_store

T0 = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def clock(*times: datetime) -> Any:
    moments = iter(times)
    last = [T0]

    def now() -> datetime:
        last[0] = next(moments, last[0])
        return last[0]

    return now


async def vectors_of(store: SqliteStore) -> list[tuple[Any, ...]]:
    async with store._read() as db:
        rows = await db.execute_fetchall(
            "SELECT seq, owner, collection, space, hash, label, text, vector "
            "FROM memory_vectors ORDER BY seq"
        )
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]


async def test_a_sqlite_backup_restores_every_table_and_secret_as_it_was(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    async with await open_sqlite_store(home / "tavernkit.db") as source:
        await populate(source)
        before, vectors = await dump(source), await vectors_of(source)
        fingerprints = [k.fingerprint for k in await source.list_api_keys(owner="bob")]
        made, manifest = await make_backup(source, tmp_path / "backups", now=clock(T0))
    assert made.name == "tavernkit-backup-20261201T060000.000000Z"
    # the manifest: every file with its size and hash, the schema, the rows, who made it
    on_disk = read_manifest(made)
    assert on_disk == manifest
    assert manifest.schema_version == MIGRATIONS[-1][0] and manifest.backend == "sqlite"
    assert manifest.tavernkit_version and manifest.verified["integrity"] == "ok"
    assert manifest.tables["messages"] == 6 and manifest.tables["memory_vectors"] == 4
    assert set(manifest.tables) == set(DATA_TABLES)
    listed = {f.path for f in manifest.files}
    # the keys' secrets are in the database, sealed as stored: no plaintext in the backup
    assert listed == {"tavernkit.db"}
    assert all(row[4].startswith("tk1:") for row in before["api_keys"])
    backup_bytes = b"".join(p.read_bytes() for p in made.rglob("*") if p.is_file())
    assert before["secrets"] and all(
        plain.encode() not in backup_bytes for plain in before["secrets"].values()
    )
    for path in made.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path
    assert check_backup(made).whole

    async with await open_sqlite_store(other / "tavernkit.db") as target:
        assert await restore_backup(made, target, where=str(other)) == manifest
        # every row as it was, the sealed secrets byte for byte, and they open
        assert await dump(target) == before
        assert await vectors_of(target) == vectors
        # the restored install keeps its fingerprints
        restored_keys = await target.list_api_keys(owner="bob")
        assert [k.fingerprint for k in restored_keys] == fingerprints


async def test_a_backup_is_one_state_while_the_store_is_written(tmp_path: Path) -> None:
    """Writers go on while the backup copies: the copy holds the rows it counted, and the
    verification on write agrees with the source's snapshot."""
    async with await open_sqlite_store(tmp_path / "home" / "tavernkit.db") as store:
        chat = await store.create_chat({"chat_metadata": {}}, [], name="busy")
        stop = asyncio.Event()

        async def write() -> int:
            n = 0
            while not stop.is_set():
                await store.append_message(chat.id, {"name": "A", "is_user": True, "mes": "x"})
                n += 1
                await asyncio.sleep(0)
            return n

        writer = asyncio.create_task(write())
        await asyncio.sleep(0.05)
        made, manifest = await make_backup(store, tmp_path / "backups")
        stop.set()
        written = await writer
    assert 0 < manifest.tables["messages"] <= written
    assert check_backup(made).whole


async def test_postgresql_backs_up_and_restores_into_postgresql_and_sqlite(
    postgres_url: str, postgres_cluster: Any, tmp_path: Path
) -> None:
    lite = await open_sqlite_store(tmp_path / "a" / "tavernkit.db")
    pg = await open_postgres_store(postgres_url, key_dir=tmp_path / "pg-keys")
    other_url = await postgres_cluster.create_database()
    restored_pg = await open_postgres_store(other_url, key_dir=tmp_path / "pg-keys-2")
    try:
        await populate(lite)
        before, vectors = await dump(lite), await vectors_of(lite)
        from tavernkit.store.admin import copy_store

        await copy_store(lite, pg)
        made, manifest = await make_backup(pg, tmp_path / "backups")
        assert manifest.backend == "postgresql" and manifest.tables["memory_vectors"] == 4
        assert check_backup(made).whole
        await restore_backup(made, restored_pg, where="the database")
        assert await dump(restored_pg) == before
        assert await vectors_of(restored_pg) == vectors
        # the restored database goes on numbering vectors after the copied ones
        await restored_pg.add_vectors(
            "chat:new", "minilm", [(1, "c", 0)], np.array([[1.0, 1.0]], dtype=np.float32)
        )
        async with await open_sqlite_store(tmp_path / "b" / "tavernkit.db") as back:
            await restore_backup(made, back, where="home b")
            assert await dump(back) == before
    finally:
        for s in (lite, pg, restored_pg):
            await s.close()
        await postgres_cluster.drop_database(other_url)


async def test_a_restore_into_a_home_that_holds_data_is_refused(tmp_path: Path) -> None:
    async with await open_sqlite_store(tmp_path / "home" / "tavernkit.db") as source:
        await populate(source)
        made, _ = await make_backup(source, tmp_path / "backups")
    async with await open_sqlite_store(tmp_path / "busy" / "tavernkit.db") as busy:
        await busy.put("persona", {"name": "Me", "description": "mine"})
        with pytest.raises(HomeNotEmpty, match="already holds data") as refused:
            await restore_backup(made, busy, where="busy home")
        assert refused.value.where == "busy home" and "records" in refused.value.found
        assert len(await busy.list("persona")) == 1  # nothing was written
    async with await open_sqlite_store(tmp_path / "keys" / "tavernkit.db") as keyed:
        await keyed.add_api_key("openai", "sk-already-here-0123456789")
        with pytest.raises(HomeNotEmpty, match="already holds data"):
            await restore_backup(made, keyed, where="keyed home")


async def test_the_check_finds_damaged_missing_and_unfinished_backups(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    async with await open_sqlite_store(tmp_path / "home" / "tavernkit.db") as source:
        await populate(source)
        times = clock(T0, T0, T0 + timedelta(hours=6), T0 + timedelta(hours=6))
        first, _ = await make_backup(source, folder, now=times)
        second, _ = await make_backup(source, folder, now=times)
    assert check_backups(folder, now=T0 + timedelta(hours=7), every_s=6 * 3600).ok

    # one byte of the database changed: its hash no longer matches
    db = second / "tavernkit.db"
    data = bytearray(db.read_bytes())
    data[len(data) // 2] ^= 0xFF
    db.write_bytes(bytes(data))
    (first / "tavernkit.db").unlink()
    (folder / ".partial-tavernkit-backup-20261201T130000.000000Z").mkdir()
    report = check_backups(folder, now=T0 + timedelta(hours=7), every_s=6 * 3600)
    assert not report.ok
    problems = {s.path.name: s.problems for s in report.backups}
    assert problems[second.name] == (
        "tavernkit.db: damaged (its SHA-256 differs from the manifest's)",
    )
    assert problems[first.name] == ("tavernkit.db: missing",)
    assert "unfinished" in problems[".partial-tavernkit-backup-20261201T130000.000000Z"][0]
    # a damaged backup restores nothing
    async with await open_sqlite_store(tmp_path / "empty" / "tavernkit.db") as empty:
        with pytest.raises(BackupError, match="not a whole backup"):
            await restore_backup(second, empty, where="empty")
        assert await empty.list("persona") == []
    # a manifest that is not one
    (first / MANIFEST_NAME).write_text("{")
    assert "cannot be read" in check_backup(first).problems[0]


async def test_the_check_reports_the_gaps_in_a_schedule(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    at = [T0, T0 + timedelta(hours=6), T0 + timedelta(hours=24)]
    async with await open_sqlite_store(tmp_path / "home" / "tavernkit.db") as source:
        for t in at:
            await make_backup(source, folder, now=clock(t), every_s=6 * 3600)
    # the schedule recorded in the manifests: 6 h; 18 h without a backup is a gap, and so is
    # the stretch from the last one to now
    report = check_backups(folder, now=T0 + timedelta(hours=40))
    assert report.every_s == 6 * 3600
    assert [(g.start, g.end) for g in report.gaps] == [
        (at[1], at[2]),
        (at[2], T0 + timedelta(hours=40)),
    ]
    assert not report.ok
    assert check_backups(folder, now=T0 + timedelta(hours=25), every_s=24 * 3600).ok
    assert not check_backups(tmp_path / "nowhere", now=T0).ok
    assert check_backups(tmp_path / "home", now=T0).problems  # a folder with no backup


async def test_retention_keeps_the_newest_whole_backups(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    async with await open_sqlite_store(tmp_path / "home" / "tavernkit.db") as source:
        made = [
            (await make_backup(source, folder, now=clock(T0 + timedelta(hours=h))))[0]
            for h in range(4)
        ]
    damaged = folder / ".partial-tavernkit-backup-20261101T000000.000000Z"
    damaged.mkdir()
    removed = prune_backups(folder, 2)
    assert removed == made[:2]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [made[2].name, made[3].name, damaged.name]  # the unfinished one is left to look at
    )
    with pytest.raises(ValueError):
        prune_backups(folder, 0)


async def test_a_backup_without_a_keys_secret_fails_and_leaves_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with await open_sqlite_store(home / "tavernkit.db") as source:
        key = await source.add_api_key("openai", "sk-abcdefghijklmnop", label="w")
        async with source._write() as db:  # a key whose file an older version lost
            await db.execute("UPDATE api_keys SET secret = '' WHERE id = ?", (key,))
        with pytest.raises(BackupError, match="no secret") as info:
            await make_backup(source, tmp_path / "backups")
        assert key not in str(info.value)
    assert list((tmp_path / "backups").iterdir()) == []


async def test_an_older_versions_backup_with_key_files_restores_them_sealed(
    tmp_path: Path,
) -> None:
    async with await open_sqlite_store(tmp_path / "home" / "tavernkit.db") as source:
        key = await source.add_api_key("openai", "sk-from-an-old-backup-0123", label="w")
        printed = [k.fingerprint for k in await source.list_api_keys()]
        made, _ = await make_backup(source, tmp_path / "backups")
    # as the version before 015 wrote it: the secret in a file beside an empty column
    old = sqlite3.connect(made / "tavernkit.db")
    with old:
        old.execute("UPDATE api_keys SET secret = ''")
        old.execute("DELETE FROM store_secrets")
        old.execute("DELETE FROM _migrations WHERE name = '015_sealed_key_secrets'")
        old.execute("DROP TABLE store_secrets")
        old.execute("DROP TRIGGER api_keys_sealed_in")
        old.execute("DROP TRIGGER api_keys_sealed_edit")
    old.close()
    keys = made / "tavernkit.db.keys"
    KeyFiles(keys).write(key, "sk-from-an-old-backup-0123")
    manifest = json.loads((made / MANIFEST_NAME).read_text())
    manifest["files"] = [
        {"path": p.relative_to(made).as_posix(), "size": p.stat().st_size, "sha256": sha256_of(p)}
        for p in sorted(made.rglob("*"))
        if p.is_file() and p.name != MANIFEST_NAME
    ]
    manifest["tables"].pop("store_secrets")
    (made / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert check_backup(made).whole, check_backup(made).problems
    async with await open_sqlite_store(tmp_path / "other" / "tavernkit.db") as target:
        await restore_backup(made, target, where="other")
        assert await target.get_api_key_secret(key) == "sk-from-an-old-backup-0123"
        assert [k.fingerprint for k in await target.list_api_keys()] != printed  # a new install
    assert not (tmp_path / "other" / "tavernkit.db.keys").exists()


def test_the_cli_backs_up_checks_keeps_and_restores(tmp_path: Path) -> None:
    home, other, to = tmp_path / "home", tmp_path / "other", tmp_path / "to"
    runner = CliRunner()

    async def fill() -> dict[str, Any]:
        async with await open_sqlite_store(home / "tavernkit.db") as s:
            await populate(s)
            return await dump(s)

    async def read(where: Path) -> dict[str, Any]:
        async with await open_sqlite_store(where / "tavernkit.db") as s:
            return await dump(s)

    before = asyncio.run(fill())
    for _ in range(3):
        made = runner.invoke(app, ["backup", "--home", str(home), "--to", str(to), "--keep", "2"])
        assert made.exit_code == 0, made.output
        assert "backed up and verified" in made.output
    assert "removed (over --keep 2)" in made.output
    backups = sorted(to.iterdir())
    assert len(backups) == 2
    checked = runner.invoke(app, ["backup", "check", str(to)])
    assert checked.exit_code == 0, checked.output
    assert [line[:3] for line in checked.output.splitlines()].count("ok ") == 2
    restored = runner.invoke(app, ["restore", str(backups[-1]), "--home", str(other)])
    assert restored.exit_code == 0, restored.output
    assert asyncio.run(read(other)) == before
    again = runner.invoke(app, ["restore", str(backups[-1]), "--home", str(other)])
    assert again.exit_code == 1 and "already holds data" in again.output
    # a damaged file: the check says which and exits 1
    manifest = json.loads((backups[0] / MANIFEST_NAME).read_text())
    (backups[0] / "tavernkit.db").write_bytes(b"not a database")
    damaged = runner.invoke(app, ["backup", "check", str(to)])
    assert damaged.exit_code == 1
    assert "DAMAGED" in damaged.output and "tavernkit.db" in damaged.output
    assert manifest["schema_version"] == MIGRATIONS[-1][0]
    time.sleep(1.6)  # more than one and a half intervals of a 1 s schedule since the last
    gaps = runner.invoke(app, ["backup", "check", str(to), "--every", "1s"])
    assert gaps.exit_code == 1 and "GAP" in gaps.output
    bad = runner.invoke(app, ["backup", "check", str(to), "--every", "soon"])
    assert bad.exit_code == 2 and "not an interval" in bad.output
    # the default folder is the home's backups/
    default = runner.invoke(app, ["backup", "--home", str(home)])
    assert default.exit_code == 0 and len(list((home / "backups").iterdir())) == 1


def test_the_cli_backs_up_and_restores_a_postgresql_database(
    postgres_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    home, to = tmp_path / "home", tmp_path / "backups"
    source, target = (asyncio.run(postgres_cluster.create_database()) for _ in range(2))

    async def fill() -> dict[str, Any]:
        async with await open_sqlite_store(home / "tavernkit.db") as s:
            await populate(s)
            return await dump(s)

    async def read(url: str, keys: Path) -> dict[str, Any]:
        async with await open_postgres_store(url, key_dir=keys) as s:
            return await dump(s)

    try:
        before = asyncio.run(fill())
        monkeypatch.setenv("TAVERNKIT_KEY_DIR", str(tmp_path / "keys-a"))
        copied = runner.invoke(app, ["copy-data", "--to", source, "--home", str(home)])
        assert copied.exit_code == 0, copied.output
        made = runner.invoke(app, ["backup", "--database", source, "--to", str(to)])
        assert made.exit_code == 0, made.output
        (backup,) = to.iterdir()
        assert read_manifest(backup).backend == "postgresql"
        monkeypatch.setenv("TAVERNKIT_KEY_DIR", str(tmp_path / "keys-b"))
        restored = runner.invoke(app, ["restore", str(backup), "--database", target])
        assert restored.exit_code == 0, restored.output
        assert asyncio.run(read(target, tmp_path / "keys-b")) == before
        with_password = target.replace("@", ":s3cret-pw@", 1)
        again = runner.invoke(app, ["restore", str(backup), "--database", with_password])
        assert again.exit_code == 1 and "already holds data" in again.output
        assert "s3cret-pw" not in again.output  # the URL is named without its password
    finally:
        for url in (source, target):
            asyncio.run(postgres_cluster.drop_database(url))
