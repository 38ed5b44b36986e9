"""Writers and the utility profile over HTTP (a real uvicorn, a scripted upstream; each
profile names its own model, so the request's ``model`` says which profile sent it): the
character's writer set by ``PUT /characters/{ref}/writer`` (each name checked first) or with
the card, its turns going through it, a deleted writer profile refusing the turn by name;
``utility_profile`` in ``PATCH /settings/selections`` and ``POST /tasks`` with
``side_task``."""

from __future__ import annotations

from chat._server import Reply
from tavernkit.models.profile import ConnectionProfile

from ._site import Site, site

__all__ = ["site"]  # the fixture, used by name


async def _profile(site: Site, name: str, model: str) -> None:
    profile = ConnectionProfile(
        name=name, source="openai", base_url=site.upstream.base_url + "/v1", model=model
    )
    await site.tk.store.put("connection_profile", profile, owner=site.tk.owner)


async def test_a_writer_is_set_checked_and_answers_the_characters_turns(site: Site) -> None:
    c = site.client
    assert (await c.get("/characters/Mira/writer")).json() == {
        "character_id": (await c.get("/characters/Mira")).json()["id"],
        "character": "Mira",
        "profile": None,
        "preset": None,
    }
    ghost = await c.put("/characters/Mira/writer", json={"profile": "ghost"})
    assert ghost.status_code == 404 and "'ghost'" in ghost.json()["error"]["message"]
    no_preset = await c.put("/characters/Mira/writer", json={"preset": "gone"})
    assert no_preset.status_code == 404 and "'gone'" in no_preset.json()["error"]["message"]
    assert (await c.get("/characters/Mira/writer")).json()["profile"] is None  # nothing stored

    await _profile(site, "storyteller", "m-writer")
    r = await c.put("/characters/Mira/writer", json={"profile": "storyteller"})
    assert r.status_code == 200 and r.json()["profile"] == "storyteller"
    card = (await c.get("/characters/Mira")).json()["data"]
    assert card["data"]["extensions"]["tavernkit"]["writer"] == {
        "profile": "storyteller",
        "preset": None,
    }
    site.upstream.script(Reply(text="Aye."))
    chat = await site.new_chat()
    out = await site.tk.chats.send(chat, "Evening.")
    assert out.status == "completed", out.error
    assert site.upstream.requests[-1].body["model"] == "m-writer"

    # the writer's profile deleted: the turn is refused before it starts, by name, and the
    # user's message is not stored
    await site.tk.store.delete("connection_profile", "storyteller", owner=site.tk.owner)
    before = len((await site.tk.chats.load(chat)).messages)
    refused = await site.start(chat, text="Still there?")
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("GenerateTaskError", "invalid_input")
    assert error["field"] == "data.extensions.tavernkit.writer.profile"
    assert "'Mira'" in error["message"] and "'storyteller'" in error["message"]
    assert len((await site.tk.chats.load(chat)).messages) == before
    assert site.upstream.requests[-1].body["model"] == "m-writer"  # nothing more was sent

    # a profile that is stored but cannot be used (no base URL for its source): the same
    unusable = ConnectionProfile(name="storyteller", source="custom", model="m-writer")
    await site.tk.store.put("connection_profile", unusable, owner=site.tk.owner)
    refused = await site.start(chat, text="Still there?")
    assert refused.status_code == 400, refused.text
    assert "'storyteller'" in refused.json()["error"]["message"]
    assert len((await site.tk.chats.load(chat)).messages) == before

    cleared = await c.put("/characters/Mira/writer", json={"profile": None, "preset": None})
    assert cleared.json()["profile"] is None
    card = (await c.get("/characters/Mira")).json()["data"]
    assert "tavernkit" not in card["data"]["extensions"]


async def test_a_card_with_a_malformed_writer_is_refused_by_field(site: Site) -> None:
    card = (await site.client.get("/characters/Mira")).json()["data"]
    card["data"]["extensions"]["tavernkit"] = {"writer": {"profile": 3}}
    r = await site.client.put("/characters/Mira", json=card)
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "data.extensions.tavernkit.writer.profile"


async def test_the_utility_profile_is_selected_by_name_and_runs_side_tasks(site: Site) -> None:
    c = site.client
    assert (await c.get("/settings/selections")).json()["utility_profile"] is None
    ghost = await c.patch("/settings/selections", json={"utility_profile": "ghost"})
    assert ghost.status_code == 404 and "'ghost'" in ghost.json()["error"]["message"]
    await _profile(site, "helper", "m-utility")
    r = await c.patch("/settings/selections", json={"utility_profile": "helper"})
    assert r.status_code == 200 and r.json()["utility_profile"] == "helper"
    assert r.json()["profile"] == "scripted"  # the main selection is unchanged

    site.upstream.script(Reply(text="hello"), Reply(text="hello"))
    task = {"task_messages": [{"role": "user", "content": "Translate: bonjour."}]}
    assert (await c.post("/tasks", json={**task, "side_task": True})).status_code == 200
    assert (await c.post("/tasks", json=task)).status_code == 200
    assert [r.body["model"] for r in site.upstream.requests] == ["m-utility", "m1"]

    r = await c.patch("/settings/selections", json={"utility_profile": None})
    assert r.json()["utility_profile"] is None
