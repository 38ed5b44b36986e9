"""Memory over a real uvicorn on loopback: the memory settings read and changed key by key
(nothing stored on a bad key or value), and a chat's summary read and edited; the same through
``tavernkit memory``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from chat._server import Reply
from tavernkit.cli import app
from tavernkit.facade import Tavern
from tavernkit.models.chat import Message
from tavernkit.models.memory import MemorySettings

from ._site import Site, site

__all__ = ["site"]  # the fixture, used by name


async def test_memory_settings_are_read_and_set_key_by_key(site: Site) -> None:
    c = site.client
    r = await c.get("/memory/settings")
    assert r.status_code == 200
    assert MemorySettings.model_validate(r.json()) == MemorySettings()
    assert r.json()["summary"]["promptInterval"] == 10  # Summarize's own spelling
    change = {
        "vectors": {"enabled_chats": True, "depth": 4},
        "summary": {"source": "main", "promptInterval": 3, "prompt_words": 50},
    }
    r = await c.patch("/memory/settings", json=change)
    assert r.status_code == 200, r.text
    stored = (await site.tk.settings()).memory
    assert stored.vectors.enabled_chats and stored.vectors.depth == 4
    assert not stored.vectors.enabled_world_info  # a key left out keeps its value
    assert stored.summary.source == "main" and stored.summary.prompt_interval == 3
    assert stored.summary.prompt_words == 50
    assert MemorySettings.model_validate(r.json()) == stored
    assert MemorySettings.model_validate((await c.get("/memory/settings")).json()) == stored

    r = await c.patch("/memory/settings", json={"vectors": {"enabled_world_info": True}})
    assert (await site.tk.settings()).memory.vectors.enabled_world_info
    assert (await site.tk.settings()).memory.vectors.depth == 4


async def test_a_bad_memory_setting_is_refused_and_nothing_is_stored(site: Site) -> None:
    c = site.client
    for change, field in (
        ({"vectors": {"enabled_chats": True, "nope": 1}}, "vectors.nope"),
        ({"vectors": {"depth": "deep"}}, "vectors.depth"),
        ({"summary": {"source": "main"}, "vectors": {"score_threshold": "x"}}, "vectors."),
        ({"mood": {}}, "body.mood"),
    ):
        r = await c.patch("/memory/settings", json=change)
        assert r.status_code == 422, (change, r.text)
        assert r.json()["error"]["field"].startswith(field), r.json()
        assert (await site.tk.settings()).memory == MemorySettings()


async def test_a_chats_summary_is_read_and_edited(site: Site) -> None:
    c = site.client
    chat = await site.new_chat()  # the greeting only
    assert (await c.get(f"/chats/{chat}/summary")).json() == {"text": ""}
    short = await c.put(f"/chats/{chat}/summary", json={"text": "Ada boarded."})
    assert short.status_code == 400 and short.json()["error"]["type"] == "MemoryConfigError"
    await c.post(f"/chats/{chat}/messages", json={"name": "Ada", "text": "Hello"})
    r = await c.put(f"/chats/{chat}/summary", json={"text": "Ada boarded."})
    assert r.status_code == 200, r.text
    assert r.json() == {"text": "Ada boarded.", "message_index": 0}
    assert (await c.get(f"/chats/{chat}/summary")).json() == {"text": "Ada boarded."}
    stored = await site.tk.chats.load(chat)
    assert stored.messages[0].data["extra"]["memory"] == "Ada boarded."
    assert (await c.get("/chats/nope/summary")).status_code == 404


async def test_summarize_now_uses_the_chats_model_and_stores_the_summary(site: Site) -> None:
    c = site.client
    chat = await site.new_chat()
    await c.post(f"/chats/{chat}/messages", json={"name": "Ada", "text": "We sail at dawn."})
    await c.post(f"/chats/{chat}/messages", json={"name": "Mira", "text": "Aye.", "is_user": False})
    site.upstream.script(Reply(text="Ada and Mira sail at dawn."))
    r = await c.post(f"/chats/{chat}/summary/now")
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Ada and Mira sail at dawn."
    assert isinstance(r.json()["message_index"], int)
    assert (await c.get(f"/chats/{chat}/summary")).json() == {"text": "Ada and Mira sail at dawn."}
    # the model was asked with SillyTavern's summary prompt
    sent = json.dumps(site.upstream.requests[-1].body)
    assert "Summarize the most important facts and events" in sent
    assert (await c.post("/chats/nope/summary/now")).status_code == 404


async def _chat_of_two(home: Path) -> str:
    async with Tavern(home) as tk:
        card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Mira"}}
        await tk.library.import_bytes(json.dumps(card).encode(), source="mira.json")
        chat = (await tk.chats.new_chat("Mira")).id
        await tk.store.append_message(chat, Message.new("Ada", "Hi", is_user=True), owner=tk.owner)
        await tk.store.append_message(
            chat, Message.new("Ada", "Hello", is_user=True), owner=tk.owner
        )
        return chat


async def _memory(home: Path) -> MemorySettings:
    async with Tavern(home) as tk:
        return (await tk.settings()).memory


def test_the_memory_cli_shows_sets_and_edits_the_summary(tmp_path: Path) -> None:
    runner = CliRunner()
    home = ["--home", str(tmp_path)]

    def run(*args: str) -> str:
        result = runner.invoke(app, ["memory", *args, *home])
        assert result.exit_code == 0, result.output
        return result.output

    assert '"promptInterval": 10' in run("show")
    run("set", "vectors.enabled_chats=true", "summary.source=main", "summary.template=[S]")
    bad = runner.invoke(app, ["memory", "set", "vectors.nope=1", *home])
    assert bad.exit_code == 1 and "vectors has no setting 'nope'" in bad.output
    shape = runner.invoke(app, ["memory", "set", "enabled_chats", *home])
    assert shape.exit_code == 1 and "section.key=value" in shape.output
    memory = asyncio.run(_memory(tmp_path))
    assert memory.vectors.enabled_chats and memory.summary.source == "main"
    assert memory.summary.template == "[S]" and not memory.vectors.enabled_world_info

    chat = asyncio.run(_chat_of_two(tmp_path))
    assert "(no summary)" in run("summary", chat)
    assert "summary stored on message 0" in run("summary", chat, "--set", "They met.")
    assert "They met." in run("summary", chat)
