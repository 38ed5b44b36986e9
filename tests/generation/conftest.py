"""Fixtures of the turn-runner tests: a scripted upstream on loopback and a world around it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from ._harness import FakeClock, World
from ._upstream import ScriptedUpstream


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    server = await ScriptedUpstream(max_hang=5.0).start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def world(upstream: ScriptedUpstream) -> AsyncIterator[World]:
    async with httpx2.AsyncClient() as client:
        yield World(upstream, client, FakeClock())
