"""The CLI on PostgreSQL: with ``TAVERNKIT_DATABASE_URL`` set, every command reads and writes
the database (a real cluster, tests/_services.py), not the home's SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _services import PostgresCluster
from tavernkit.cli import app
from tavernkit.facade import Tavern

DEMO = Path(__file__).resolve().parents[2] / "src" / "tavernkit" / "data" / "wren.json"


def test_commands_use_the_database_url(
    postgres_cluster: PostgresCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = asyncio.run(postgres_cluster.create_database())
    home = tmp_path / "home"
    monkeypatch.setenv("TAVERNKIT_DATABASE_URL", url)
    runner = CliRunner()
    try:
        imported = runner.invoke(app, ["import", str(DEMO), "--home", str(home)])
        assert imported.exit_code == 0 and "imported character Wren" in imported.output
        listed = runner.invoke(app, ["list", "characters", "--json", "--home", str(home)])
        assert [json.loads(line)["name"] for line in listed.output.splitlines()] == ["Wren"]
        assert not (home / "tavernkit.db").exists()  # nothing went to SQLite

        async def names() -> list[str]:
            async with Tavern(tmp_path / "elsewhere", database=url) as tk:
                return [r.name for r in await tk.store.list("character")]

        assert asyncio.run(names()) == ["Wren"]
    finally:
        asyncio.run(postgres_cluster.drop_database(url))
