"""Settings over a real uvicorn on loopback: world info, prompt and reasoning settings and the
compatibility mode read and changed key by key (a global lorebook switched on reaches the
next turn's prompt); a bad section, key, value or book is a 422 naming it and stores
nothing; each user's settings are their own; the same through ``tavernkit settings``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from chat._server import Reply
from tavernkit.cli import app
from tavernkit.models.settings import Settings

from ._cards import LOREBOOK
from ._site import Site, site
from .conftest import Users

__all__ = ["site"]  # the fixture, used by name

#: the book's entry goes in at depth 0 (the site's preset has no world-info slot)
AT_DEPTH: dict[str, Any] = {
    "name": "Harbour",
    "entries": {
        "0": {"uid": 0, "key": ["ferry"], "content": "The ferry leaves at dusk.", "position": 4,
              "depth": 0, "role": 0}
    },
}  # fmt: skip


async def test_settings_are_read_and_set_key_by_key(site: Site) -> None:
    c = site.client
    r = await c.get("/settings")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["world_info"]["depth"] == 2 and body["prompt"]["max_context"] == 8192
    assert body["reasoning"]["auto_parse"] is False and body["compat"] == "default"
    assert (await c.post("/lorebooks", json=AT_DEPTH)).status_code == 201
    change = {
        "world_info": {"depth": 4, "global_books": ["Harbour"], "recursive": False},
        "reasoning": {"auto_parse": True},
        "prompt": {"max_context": 16384},
        "compat": "st-1.18",
    }
    r = await c.patch("/settings", json=change)
    assert r.status_code == 200, r.text
    stored = await site.tk.settings()
    assert stored.world_info.depth == 4 and stored.world_info.global_books == ["Harbour"]
    assert not stored.world_info.recursive and stored.world_info.budget == 25  # kept
    assert stored.reasoning.auto_parse and stored.prompt.max_context == 16384
    assert stored.compat == "st-1.18"
    assert r.json() == (await c.get("/settings")).json()
    assert r.json()["world_info"]["global_books"] == ["Harbour"]
    # the global book is in force on the next turn
    chat = await site.new_chat()
    site.upstream.script(Reply(text="Aye."))
    out = await site.tk.chats.send(chat, "When does the ferry leave?")
    assert out.status == "completed", out.error
    assert "The ferry leaves at dusk." in json.dumps(site.upstream.requests[-1].body)


async def test_a_bad_setting_is_refused_and_nothing_is_stored(site: Site) -> None:
    c = site.client
    before = await site.tk.settings()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"world_info": {"depth": 3, "nope": 1}}, "world_info.nope"),
        ({"world_info": {"depth": "deep"}}, "world_info.depth"),
        ({"world_info": {"depth": 5000}}, "world_info.depth"),
        ({"world_info": {"budget": 0}}, "world_info.budget"),
        ({"world_info": {"char_lore": []}}, "world_info.char_lore"),
        ({"world_info": {"global_books": ["Nowhere"]}}, "world_info.global_books"),
        ({"prompt": {"amount_gen": 0}, "reasoning": {"auto_parse": True}}, "prompt.amount_gen"),
        ({"compat": "st-1.12"}, "body.compat"),
        ({"selections": {"character": "Mira"}}, "body.selections"),
    ]
    for change, field in cases:
        r = await c.patch("/settings", json=change)
        assert r.status_code == 422, (change, r.text)
        assert r.json()["error"]["field"] == field, r.json()
        assert "5000" not in r.text and "deep" not in r.text  # values are not echoed
        assert await site.tk.settings() == before


async def test_each_users_settings_are_their_own(users: Users) -> None:
    r = await users.bob.patch("/settings", json={"world_info": {"depth": 7}, "compat": "st-1.18"})
    assert r.status_code == 200, r.text
    ann = (await users.ann.get("/settings")).json()
    assert ann["world_info"]["depth"] == 2 and ann["compat"] == "default"
    assert (await users.bob.get("/settings")).json()["world_info"]["depth"] == 7
    # a global book must be the caller's own
    assert (await users.ann.post("/lorebooks", json=LOREBOOK)).status_code == 201
    r = await users.bob.patch("/settings", json={"world_info": {"global_books": ["Harbour"]}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "world_info.global_books"


def test_the_settings_command(tmp_path: Path) -> None:
    runner = CliRunner()
    home = str(tmp_path / "home")
    r = runner.invoke(
        app, ["settings", "set", "world_info.depth=6", "compat=st-1.18", "--home", home]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["world_info"]["depth"] == 6
    r = runner.invoke(app, ["settings", "show", "reasoning", "--home", home])
    assert r.exit_code == 0 and json.loads(r.stdout)["template"] == "Think XML"
    for bad in (["world_info.nope=1"], ["depth=4"], ["world_info.depth=-1"], ["compat=old"]):
        r = runner.invoke(app, ["settings", "set", *bad, "--home", home])
        assert r.exit_code != 0 and "Traceback" not in r.output, (bad, r.output)
    r = runner.invoke(app, ["settings", "show", "nonsense", "--home", home])
    assert r.exit_code != 0 and "no settings section 'nonsense'" in r.output
    r = runner.invoke(app, ["settings", "show", "--home", home])
    shown = json.loads(r.stdout)
    assert shown["world_info"]["depth"] == 6 and shown["compat"] == "st-1.18"
    assert Settings().world_info.depth == 2  # the others kept their defaults
    assert shown["prompt"]["max_context"] == 8192
