"""Scheduled backups in a running server (``serve --backup-every``): made on time while the
server serves, verified, kept to ``--backup-keep``, restorable; ``GET /backups/latest`` says
when the last verified one was made (and, to admins only, why the last one failed); a restart
does not back up again before the interval is over."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tavernkit.errors import ServerConfigError
from tavernkit.server.settings import ServerSettings
from tavernkit.store.backup import make_backup
from tavernkit.store.backup_check import check_backup
from tavernkit.store.backup_manifest import read_manifest
from tavernkit.store.restore import restore_backup
from tavernkit.store.sqlite import open_store as open_sqlite_store

from ._live import LiveServer, live_server
from .conftest import PASSWORD, settings, token_client


def whole_backups(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if check_backup(p).whole)


async def wait_for(condition: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_the_server_backs_up_on_schedule_and_keeps_the_newest(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    conf = settings(tmp_path / "home", backup_every_s=0.4, backup_dir=folder, backup_keep=2)
    async with live_server(conf) as server, server.client() as client:
        store = server.state.tavern.store
        await store.put("persona", {"name": "Kept", "description": "in every backup"})
        made: set[str] = set()

        def enough() -> bool:
            made.update(p.name for p in whole_backups(folder))
            return len(made) >= 4

        # the server answers while it backs up
        while not enough():
            assert (await client.get("/health")).status_code == 200
            await asyncio.sleep(0.05)
        latest = (await client.get("/backups/latest")).json()
        assert latest["scheduled"] is True and latest["every_s"] == 0.4
        assert latest["last"]["verified"] is True and latest["last_error"] is None
        assert latest["last"]["files"] >= 1 and latest["last"]["schema_version"]
    kept = whole_backups(folder)
    assert len(kept) == 2  # --backup-keep 2
    assert [read_manifest(p).every_s for p in kept] == [0.4, 0.4]  # for the gap check
    assert not [p for p in folder.iterdir() if p.name.startswith(".partial-")]  # none left half
    async with await open_sqlite_store(tmp_path / "restored" / "tavernkit.db") as target:
        await restore_backup(kept[-1], target, where="restored")
        assert [r.name for r in await target.list("persona")] == ["Kept"]


async def test_a_restart_waits_out_the_interval_of_the_last_backup(tmp_path: Path) -> None:
    home, folder = tmp_path / "home", tmp_path / "home" / "backups"
    async with await open_sqlite_store(home / "tavernkit.db") as store:
        _, manifest = await make_backup(store, folder)
    conf = settings(home, backup_every_s=3600.0)
    async with live_server(conf) as server, server.client() as client:
        await asyncio.sleep(0.5)
        latest = (await client.get("/backups/latest")).json()
    assert len(whole_backups(folder)) == 1  # not backed up again at start
    assert datetime.fromisoformat(latest["last"]["created"]) == manifest.created
    due = datetime.fromisoformat(latest["next_at"])
    assert abs(due - (manifest.created + timedelta(hours=1))) < timedelta(seconds=1)


async def test_latest_without_a_schedule_reads_the_homes_backups(local: LiveServer) -> None:
    async with local.client() as client:
        none = (await client.get("/backups/latest")).json()
        assert none == {
            "scheduled": False,
            "every_s": None,
            "next_at": None,
            "last": None,
            "last_error": None,
        }
        _, manifest = await make_backup(
            local.state.tavern.store, local.state.tavern.home / "backups"
        )
        found = (await client.get("/backups/latest")).json()
    assert datetime.fromisoformat(found["last"]["created"]) == manifest.created
    assert found["last"]["verified"] is True and found["scheduled"] is False


async def test_a_failed_backup_is_told_to_admins_only(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the backups should go")
    conf = settings(tmp_path / "home", accounts=True, backup_every_s=60.0, backup_dir=blocked)
    async with live_server(conf) as server:
        accounts = server.state.accounts
        await accounts.create_user("admin", PASSWORD, is_admin=True)
        await accounts.create_user("bob", PASSWORD)
        admin, bob = [await token_client(server, n) for n in ("admin", "bob")]
        try:
            schedule = server.state.backups
            assert schedule is not None
            await wait_for(lambda: schedule.last_error is not None)
            seen = (await admin.get("/backups/latest")).json()
            assert "cannot write a backup" in seen["last_error"] and seen["last"] is None
            told = (await bob.get("/backups/latest")).json()
            assert told["last_error"] is None and told["scheduled"] is True
            async with server.client() as anonymous:
                assert (await anonymous.get("/backups/latest")).status_code == 401
        finally:
            await admin.aclose()
            await bob.aclose()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"backup_every_s": 0.0}, "backup_every_s"), ({"backup_keep": 0}, "backup_keep")],
)
def test_bad_backup_settings_refuse_to_start(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ServerConfigError, match=message):
        ServerSettings(**overrides).check()  # type: ignore[arg-type]
