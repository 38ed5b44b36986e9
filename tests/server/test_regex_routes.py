"""The regex routes over a real uvicorn on loopback: the global list (add as the editor does,
patch, order, toggle, delete), SillyTavern's export and import files, a card's scripts off
until allowed, the editor's test box, and the ``display`` a message body gains when
display-only scripts change what it shows."""

from __future__ import annotations

import json
from typing import Any

from tavernkit.models.chat import Message

from ._site import Site, site

__all__ = ["site"]  # the fixture, used by name


async def _add(site: Site, **fields: Any) -> dict[str, Any]:
    r = await site.client.post("/regex/scripts", json=fields)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_the_global_list(site: Site) -> None:
    c = site.client
    first = await _add(site, scriptName="One", findRegex="/a/g", replaceString="b")
    # the editor's defaults fill what the form left out, in SillyTavern's key order
    assert list(first)[:4] == ["id", "scriptName", "findRegex", "replaceString"]
    assert first["placement"] == [1] and first["markdownOnly"] is True
    second = await _add(site, scriptName="Two", findRegex="x")
    r = await c.patch(f"/regex/scripts/{second['id']}", json={"replaceString": "y", "odd": 1})
    assert r.json()["replaceString"] == "y" and list(r.json())[-1] == "odd"
    r = await c.put("/regex/scripts/Two/position", json={"position": 0})
    assert [s["scriptName"] for s in r.json()] == ["Two", "One"]
    r = await c.put("/regex/scripts/one/enabled", json={"enabled": False})
    assert r.json()["disabled"] is True
    state = (await c.get("/regex")).json()
    assert [s["scriptName"] for s in state["scripts"]] == ["Two", "One"]
    assert (await c.delete("/regex/scripts/Two")).status_code == 204
    assert (await c.get("/regex/scripts/Two")).status_code == 404


async def test_export_and_import_files(site: Site) -> None:
    c = site.client
    made = await _add(site, scriptName="Oracle Export", findRegex="/(foo)/gi", replaceString="$1")
    r = await c.get(f"/regex/scripts/{made['id']}/export")
    assert "regex-oracle_export.json" in r.headers["content-disposition"]
    assert r.text.startswith('{\n    "id": ')  # JSON.stringify(script, null, 4)
    r = await c.post("/regex/import", json=[json.loads(r.text), {"scriptName": "Bare"}])
    assert r.status_code == 201, r.text
    imported = r.json()
    assert imported[0]["id"] != made["id"] and imported[1] == {
        "scriptName": "Bare",
        "id": imported[1]["id"],
    }  # kept as it is: missing keys stay missing
    r = await c.post("/regex/import", json={"findRegex": "x"})
    assert r.status_code == 422 and "Invalid regex object." in r.text


async def test_a_card_is_allowed_and_the_test_box(site: Site) -> None:
    c = site.client
    r = await c.get("/regex/characters/Mira")
    assert r.json()["scripts"] == [] and r.json()["allowed"] is False
    r = await c.put("/regex/characters/Mira/allowed", json={"allowed": True})
    assert r.json()["allowed"] is True
    assert r.json()["character_id"] in (await c.get("/regex")).json()["allowed_characters"]
    r = await c.post(
        "/regex/test",
        json={"script": {"findRegex": "/(\\w+)@/g", "replaceString": "[$1]"}, "text": "a@ b@"},
    )
    assert r.json() == {"output": "[a] [b]", "valid": True}
    r = await c.post("/regex/test", json={"script": {"findRegex": "/(a/"}, "text": "a"})
    assert r.json() == {"output": "a", "valid": False}


async def test_a_message_shows_what_display_only_scripts_make_of_it(site: Site) -> None:
    await _add(
        site,
        scriptName="Hide OOC",
        findRegex="/ ?\\(OOC:.*?\\)/g",
        replaceString="",
        placement=[1, 2],
        markdownOnly=True,
    )
    chat = await site.new_chat()
    message = Message.new("Ada", "Hi (OOC: brb)", is_user=True)
    await site.tk.store.append_message(chat, message, owner=site.tk.owner)
    page = (await site.client.get(f"/chats/{chat}/messages")).json()["items"]
    assert page[0]["data"]["mes"] == "Hi (OOC: brb)"  # stored as typed
    assert page[0]["display"] == "Hi"
    assert page[1]["display"] is None  # the greeting shows as stored
    one = (await site.client.get(f"/chats/{chat}/messages/1")).json()
    assert one["display"] == "Hi"
