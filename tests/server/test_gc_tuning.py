"""The serving process's collector (``ServerSettings.gc_full_every_s``, which ``tavernkit
serve`` sets): while the app runs, start-up's objects are frozen, growth never starts a full
collection and the timer does; when the app stops, Python's own behaviour is back. An app
made without the setting leaves the collector alone."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from tavernkit.cli.serve import SERVE_FULL_GC_EVERY_S
from tavernkit.server.app import create_app

from .conftest import settings


async def test_full_collections_run_on_the_timer_while_serving(tmp_path: Path) -> None:
    before = gc.get_threshold()
    app = create_app(settings(tmp_path / "home", gc_full_every_s=0.05))
    async with app.router.lifespan_context(app):
        young, middle, oldest = gc.get_threshold()
        assert (young, middle) == before[:2] and oldest >= 1 << 30  # growth never triggers it
        assert gc.get_freeze_count() > 0  # start-up's objects are out of every scan
        done = gc.get_stats()[2]["collections"]
        await asyncio.sleep(0.3)
        assert gc.get_stats()[2]["collections"] >= done + 2  # the timer's full collections
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    settled = gc.get_stats()[2]["collections"]
    await asyncio.sleep(0.2)
    assert gc.get_stats()[2]["collections"] - settled <= 1  # the timer stopped with the app


async def test_an_app_without_the_setting_leaves_the_collector_alone(tmp_path: Path) -> None:
    before = gc.get_threshold()
    app = create_app(settings(tmp_path / "home"))
    async with app.router.lifespan_context(app):
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert SERVE_FULL_GC_EVERY_S > 0  # what `tavernkit serve` passes
