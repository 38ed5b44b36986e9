"""Personas and the selections over a real uvicorn with a scripted upstream: a persona's avatar
uploaded, read and removed; the persona locked to a chat, to its character and the default,
in SillyTavern's order (chat > character > default), reaching the next turn's request and
the stored message's name; the active profile, chat-completion preset and text-completion
preset switched by name and reaching the next request; a bad pick refused with nothing
stored."""

from __future__ import annotations

import io
import json
from typing import Any

from PIL import Image

from chat._server import Reply
from tavernkit.models.profile import ConnectionProfile

from ._site import Site, site

__all__ = ["site"]  # the fixture, used by name


def png(width: int = 8, height: int = 8) -> bytes:
    """A small valid PNG."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), "grey").save(out, format="PNG")
    return out.getvalue()


async def _persona(site: Site, name: str, description: str, **fields: Any) -> str:
    body = {"name": name, "description": description, **fields}
    r = await site.client.post("/personas", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _turn(site: Site, chat: str, **overrides: str) -> tuple[str, str]:
    """One turn in the chat: the request the model received, as JSON, and the name the
    user's message was stored under."""
    site.upstream.script(Reply(text="Aye."))
    out = await site.tk.chats.send(chat, "Evening.", overrides=overrides or None)
    assert out.status == "completed", out.error
    stored = await site.tk.chats.load(chat)
    return json.dumps(site.upstream.requests[-1].body), str(stored.messages[-2].data["name"])


async def test_a_persona_avatar_is_uploaded_read_and_removed(site: Site) -> None:
    c = site.client
    pid = await _persona(site, "Bram", "A pilot.")
    url = f"/personas/{pid}/avatar"
    assert (await c.get(url)).status_code == 404  # none yet
    image = png()
    r = await c.put(url, files={"file": ("bram.png", image, "image/png")})
    assert r.status_code == 200, r.text
    assert r.json() == {"avatar_url": url, "media_type": "image/png", "size": len(image)}
    got = await c.get(url)
    assert got.status_code == 200 and got.content == image
    assert got.headers["content-type"] == "image/png"
    # by name too, and the persona's JSON is untouched by its image
    assert (await c.get("/personas/Bram/avatar")).content == image
    assert (await c.get(f"/personas/{pid}")).json()["data"]["description"] == "A pilot."
    # not an image: refused, the stored one kept
    bad = await c.put(url, files={"file": ("x.png", b"<svg onload=alert(1)>", "image/png")})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "file"
    empty = await c.put(url, json={})
    assert empty.status_code == 422
    assert (await c.get(url)).content == image
    assert (await c.put("/personas/nobody/avatar", json={})).status_code == 404
    assert (await c.delete(url)).status_code == 204
    assert (await c.get(url)).status_code == 404


async def test_chat_lock_beats_character_lock_beats_default(site: Site) -> None:
    c = site.client
    zed = await _persona(site, "Zed", "{{user}} is a sailor.")
    ann = await _persona(site, "Ann", "{{user}} sells tickets.")
    cal = await _persona(site, "Cal", "{{user}} mends nets.", position=4, depth=1, role=1)
    chat = await site.new_chat()
    url = f"/chats/{chat}/persona"
    none = (await c.get(url)).json()
    assert none == dict.fromkeys(("chat", "character", "default", "active", "source"))
    sent, name = await _turn(site, chat)
    assert name == "Ada" and "sailor" not in sent

    r = await c.patch("/settings/selections", json={"persona": "Zed"})
    assert r.status_code == 200 and r.json()["persona"] == zed
    now = (await c.get(url)).json()
    assert now["source"] == "default" and now["active"] == {"id": zed, "name": "Zed"}
    sent, name = await _turn(site, chat)
    assert name == "Zed" and "Zed is a sailor." in sent

    r = await c.put("/characters/Mira/persona", json={"persona": cal})
    assert r.status_code == 200, r.text
    assert r.json()["persona"] == {"id": cal, "name": "Cal"}
    mira = r.json()["character"]["id"]
    selections = (await c.get("/settings/selections")).json()
    assert selections["character_personas"] == {mira: cal}
    now = (await c.get(url)).json()
    assert now["source"] == "character" and now["character"]["name"] == "Cal"
    sent, name = await _turn(site, chat)
    assert name == "Cal" and "Cal mends nets." in sent
    # at depth 1 as the user: the description is its own message, not in the system prompt
    messages = site.upstream.requests[-1].body["messages"]
    assert {"role": "user", "content": "Cal mends nets."} in messages

    r = await c.put(url, json={"persona": "Ann"})
    assert r.status_code == 200 and r.json()["source"] == "chat"
    assert r.json()["chat"] == {"id": ann, "name": "Ann"}
    sent, name = await _turn(site, chat)
    assert name == "Ann" and "Ann sells tickets." in sent
    # the turn's own pick still wins over every lock
    sent, name = await _turn(site, chat, persona="Zed")
    assert name == "Zed" and "Zed is a sailor." in sent

    # a locked persona deleted since is skipped: the character's applies again
    assert (await c.delete(f"/personas/{ann}")).status_code == 204
    assert (await c.get(url)).json()["source"] == "character"
    sent, name = await _turn(site, chat)
    assert name == "Cal"
    # unlocking the character: the default again; a new chat of Mira's speaks as it too
    r = await c.put("/characters/Mira/persona", json={"persona": None})
    assert r.status_code == 200 and r.json()["persona"] is None
    assert (await c.get("/settings/selections")).json()["character_personas"] == {}
    assert (await c.get(url)).json()["source"] == "default"
    assert (await c.put(url, json={"persona": None})).json()["chat"] is None


async def test_a_bad_lock_is_refused_and_nothing_is_stored(site: Site) -> None:
    c = site.client
    chat = await site.new_chat()
    before = await site.tk.settings()
    for url, body in (
        (f"/chats/{chat}/persona", {"persona": "Nobody"}),
        ("/characters/Mira/persona", {"persona": "Nobody"}),
        ("/characters/Nobody/persona", {"persona": None}),
        ("/chats/nope/persona", {"persona": None}),
    ):
        r = await c.put(url, json=body)
        assert r.status_code == 404, (url, r.text)
        assert r.json()["error"]["type"] == "NotFound"
    r = await c.put(f"/chats/{chat}/persona", json={"persona": "x", "extra": 1})
    assert r.status_code == 422
    assert await site.tk.settings() == before
    meta = (await site.tk.chats.load(chat)).header["chat_metadata"]
    assert meta.get("persona") is None


async def test_the_profile_and_presets_are_switched_by_name(site: Site) -> None:
    c = site.client
    body = (await c.get("/settings/selections")).json()
    assert body["profile"] == "scripted" and body["user_name"] == "Ada"
    assert body["chat_preset"] is None and body["textgen_preset"] is None
    assert body["embedded"]["name"] == "embedded" and body["embedded"]["api"] == "local"
    assert body["embedded"]["model"]

    second = ConnectionProfile(
        name="second",
        api="chat",
        source="openai",
        base_url=site.upstream.base_url + "/v1",
        model="m2",
    )
    await site.tk.store.put("connection_profile", second, owner=site.tk.owner)
    r = await c.post("/presets/chat", json={"name": "Warm", "temperature": 0.35, "top_p": 0.8})
    assert r.status_code == 201, r.text
    preset_id = r.json()["id"]
    assert (await c.post("/presets/textgen", json={"name": "Plain"})).status_code == 201

    chat = await site.new_chat()
    sent, _ = await _turn(site, chat)
    assert json.loads(sent)["model"] == "m1"

    r = await c.patch(
        "/settings/selections",
        json={"profile": "second", "chat_preset": preset_id, "textgen_preset": "Plain"},
    )
    assert r.status_code == 200, r.text
    # a preset picked by id is stored by its name (what SillyTavern's settings hold)
    assert (r.json()["profile"], r.json()["chat_preset"]) == ("second", "Warm")
    assert r.json()["textgen_preset"] == "Plain"
    sent, _ = await _turn(site, chat)
    request = json.loads(sent)
    assert request["model"] == "m2" and request["temperature"] == 0.35
    assert request["top_p"] == 0.8
    # the active profile shows in the profile list, as the settings screen reads it
    listed = {p["name"]: p["active"] for p in (await c.get("/profiles")).json()}
    assert listed == {"scripted": False, "second": True}

    # the preset's samplers changed (the chat screen's samplers save the whole preset)
    preset = (await c.get(f"/presets/chat/{preset_id}")).json()["data"]
    r = await c.put(f"/presets/chat/{preset_id}", json={**preset, "temperature": 1.25})
    assert r.status_code == 200
    sent, _ = await _turn(site, chat)
    assert json.loads(sent)["temperature"] == 1.25

    # null clears: no preset, the profile back to the first
    r = await c.patch("/settings/selections", json={"chat_preset": None, "profile": "scripted"})
    assert r.json()["chat_preset"] is None and r.json()["textgen_preset"] == "Plain"
    sent, _ = await _turn(site, chat)
    assert json.loads(sent)["model"] == "m1" and "temperature" not in json.loads(sent)


async def test_a_bad_selection_is_refused_and_nothing_is_stored(site: Site) -> None:
    c = site.client
    before = await site.tk.settings()
    for change, status in (
        ({"profile": "nowhere", "chat_preset": None}, 404),
        ({"chat_preset": "nowhere"}, 404),
        ({"textgen_preset": "nowhere"}, 404),
        ({"persona": "nobody"}, 404),
        ({"user_name": "  "}, 422),
        ({"character": "Mira"}, 422),
    ):
        r = await c.patch("/settings/selections", json=change)
        assert r.status_code == status, (change, r.text)
    assert await site.tk.settings() == before
    r = await c.patch("/settings/selections", json={"user_name": " Ada Lovelace "})
    assert r.status_code == 200 and r.json()["user_name"] == "Ada Lovelace"
