"""A server's warm-up (``ServerSettings.warm_up``, which ``tavernkit serve`` sets): what the
first turn would load on the event loop is loaded before the server listens. The tokenizer
vocabulary took 0.3-0.7 s of a fresh server's first turn, the embedded model 0.8 s more, and
FastAPI's lazy route set-up 10-40 ms of each router's first request."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tavernkit.chat import prepare
from tavernkit.facade import Tavern
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.settings import Settings
from tavernkit.providers.local_engine import local_model_missing
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.server.app import create_app
from tavernkit.server.warmup import UNROUTED_PATH, prime_routes
from tavernkit.text import tokens

from ._live import live_server
from .conftest import settings


async def _select(tk: Tavern, profile: str | None) -> None:
    chosen = Settings()
    chosen.selections.profile = profile
    await tk.store.put_settings(chosen)


async def test_the_tokenizer_is_loaded_before_the_first_request(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        profile = ConnectionProfile(
            name="api", api="chat", source="openai", base_url="http://127.0.0.1:9/v1"
        )
        await tk.store.put("connection_profile", profile.model_copy(update={"model": "gpt-4o"}))
        await _select(tk, "api")
        # as in a fresh process: no vocabulary loaded yet
        tokens._load_encoding.cache_clear()
        prepare._shared_tokenizer.cache_clear()
        app = create_app(settings(tmp_path / "home", warm_up=True), tavern=tk)
        async with app.router.lifespan_context(app):
            assert tokens._load_encoding.cache_info().currsize == 1  # before any request
            counter = prepare._shared_tokenizer("o200k_base")
            assert counter.inner._encoding is not None  # type: ignore[attr-defined]
            assert counter.count("warm up") > 0


async def test_an_app_without_the_setting_loads_nothing_ahead(tmp_path: Path) -> None:
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        tokens._load_encoding.cache_clear()
        prepare._shared_tokenizer.cache_clear()
        app = create_app(settings(tmp_path / "home"), tavern=tk)
        async with app.router.lifespan_context(app):
            assert tokens._load_encoding.cache_info().currsize == 0


async def test_warm_up_loads_the_embedded_model_when_it_is_the_default(tmp_path: Path) -> None:
    missing = local_model_missing()
    if missing is not None:
        pytest.skip(missing)
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        loaded = await tk.warm_up()
        assert loaded[0] == "http client" and loaded[1].startswith("tokenizer ")
        assert loaded[2].startswith("embedded model ")
        # the one every turn of this Tavern uses, already loaded
        connection = await tk.context().resolve_named("")
        assert isinstance(connection.provider, LocalLlamaProvider)
        assert connection.provider.engine is not None
        assert connection.provider.engine.loaded is not None


async def test_a_model_that_cannot_load_is_logged_and_left_to_the_first_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVERNKIT_LOCAL_MODEL", str(tmp_path / "gone.gguf"))
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        with caplog.at_level(logging.WARNING, logger="tavernkit.facade"):
            loaded = await tk.warm_up()  # does not raise: the server still starts
        assert loaded == ["http client", "tokenizer cl100k_base"]
        assert "warm-up stopped:" in caplog.text
        # whichever is missing here, the model file or llama.cpp itself, the log names it
        assert "gone.gguf" in caplog.text or "xllamacpp" in caplog.text


async def test_the_priming_request_is_answered_by_no_route(tmp_path: Path) -> None:
    """Priming walks every router only while no route has its path: a catch-all added later
    would answer it (and stop the walk early), which this test would then say."""
    async with live_server(settings(tmp_path / "home")) as server:
        assert await prime_routes(server.app) == 404
        async with server.client() as client:
            answered = await client.get(UNROUTED_PATH)
        assert answered.status_code == 404


async def test_warm_up_of_a_named_profile_loads_that_profiles_tokenizer(tmp_path: Path) -> None:
    """``tavernkit chat --profile NAME`` warms what NAME's turns use, not the selected one's
    (here the embedded model, which is not loaded)."""
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        profile = ConnectionProfile(
            name="api", api="chat", source="openai", base_url="http://127.0.0.1:9/v1"
        )
        await tk.store.put("connection_profile", profile.model_copy(update={"model": "gpt-4o"}))
        assert await tk.warm_up("api") == ["http client", "tokenizer o200k_base"]
