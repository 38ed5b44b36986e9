"""The quick-reply bar of a chat: sets bound globally, to the chat and to its character (the
card's own sets included), binding them through the API, and a button click as SillyTavern's
(a script runs, a text is sent, or left in the box with ``disableSend``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chat._server import HangingServer, Reply
from chat.conftest import stock_world
from tavernkit.models.settings import Settings
from tavernkit.server.settings import RateLimit

from ._live import live_server
from ._site import Site, site
from .conftest import settings

__all__ = ["site"]  # the fixture, used by name


def qr_set(name: str, *replies: tuple[str, str], **flags: Any) -> dict[str, Any]:
    return {
        "version": 2,
        "name": name,
        "disableSend": flags.get("disableSend", False),
        "placeBeforeInput": False,
        "injectInput": flags.get("injectInput", False),
        "color": "transparent",
        "onlyBorderColor": False,
        "qrList": [
            {"id": i + 1, "label": label, "message": message}
            for i, (label, message) in enumerate(replies)
        ],
        "idIndex": len(replies),
    }


async def _stock(site: Site) -> str:
    client = site.client
    for body in (
        qr_set("Everywhere", ("Wave", "/echo waved")),
        qr_set("Scene", ("Look", "I look around."), injectInput=True),
        qr_set("Drafts", ("Draft", "Maybe {{char}}."), disableSend=True),
    ):
        response = await client.post("/quick-replies", json=body)
        assert response.status_code == 201, response.text
    settings = await site.tk.settings()
    assert isinstance(settings, Settings)
    settings.selections.quick_reply_sets = ["Everywhere"]
    await site.tk.store.put_settings(settings, owner=site.tk.owner)
    return await site.new_chat()


async def test_the_bar_shows_global_chat_and_character_sets(site: Site) -> None:
    chat = await _stock(site)
    client = site.client
    bound = await client.put(
        f"/chats/{chat}/quick-replies", json={"sets": [{"set": "Scene", "isVisible": True}]}
    )
    assert bound.json() == {"sets": [{"set": "Scene", "isVisible": True}]}
    mira = await client.put("/characters/Mira/quick-replies", json={"sets": ["Drafts"]})
    assert mira.json() == {"sets": ["Drafts"]}
    assert (await client.get("/characters/Mira/quick-replies")).json() == {"sets": ["Drafts"]}
    bar = (await client.get(f"/chats/{chat}/quick-replies")).json()["sets"]
    assert [(s["name"], s["scope"], s["visible"]) for s in bar] == [
        ("Everywhere", "global", True),
        ("Scene", "chat", True),
        ("Drafts", "character", True),
    ]
    assert bar[1]["qrList"][0]["label"] == "Look" and bar[1]["injectInput"] is True
    stored = await site.tk.store.load_chat(chat, owner=site.tk.owner)
    assert stored.header["chat_metadata"]["quickReply"] == {
        "setList": [{"set": "Scene", "isVisible": True}]
    }
    unknown = await client.put("/characters/Mira/quick-replies", json={"sets": ["Nope"]})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["field"] == "sets[0]"


async def test_a_cards_own_sets_are_on_the_bar(site: Site) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Rhea",
            "first_mes": "Hi.",
            "extensions": {"quick_reply_sets": [qr_set("Rhea's", ("Roll", "/pass rolled"))]},
        },
    }
    await site.tk.library.import_bytes(json.dumps(card).encode(), source="rhea.json")
    chat = (await site.tk.chats.new_chat("Rhea")).id
    bar = (await site.client.get(f"/chats/{chat}/quick-replies")).json()["sets"]
    assert [(s["name"], s["scope"]) for s in bar] == [("Rhea's", "character")]
    click = await site.client.post(
        f"/chats/{chat}/quick-replies/click", json={"set": "Rhea's", "label": "Roll"}
    )
    assert click.json()["pipe"] == "rolled"


async def test_a_click_runs_a_script_sends_a_text_or_fills_the_box(site: Site) -> None:
    chat = await _stock(site)
    client = site.client
    await client.put(f"/chats/{chat}/quick-replies", json={"sets": [{"set": "Scene"}]})
    await client.put("/characters/Mira/quick-replies", json={"sets": ["Drafts"]})
    url = f"/chats/{chat}/quick-replies/click"
    script = (await client.post(url, json={"set": "Everywhere", "id": 1})).json()
    assert script["error"] is None
    assert [t["message"] for t in script["toasts"]] == ["waved"]
    site.upstream.script(Reply(text="Dust and lanterns."))
    sent = await client.post(url, json={"set": "Scene", "label": "Look", "input": "Quietly,"})
    assert sent.status_code == 200, sent.text
    stored = await site.tk.chats.load(chat)
    texts = [m.data["mes"] for m in stored.messages]
    assert texts[-2:] == ["Quietly, I look around.", "Dust and lanterns."]  # injectInput
    drafted = (await client.post(url, json={"set": "Drafts", "label": "Draft"})).json()
    assert drafted["input"] == "Maybe Mira. "  # disableSend: left in the box, macros done
    assert len((await site.tk.chats.load(chat)).messages) == len(texts)
    missing = await client.post(url, json={"set": "Scene", "label": "Nope"})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "NotFound"
    neither = await client.post(url, json={"set": "Scene"})
    assert neither.status_code == 422


async def test_context_menu_sets_come_with_the_bar_and_auto_runs_without_the_input(
    site: Site,
) -> None:
    chat = await _stock(site)
    client = site.client
    menu = qr_set("Everywhere", ("Wave", "/echo waved"))
    menu["qrList"][0]["contextList"] = [{"set": "Drafts", "isChained": False}]
    await client.put("/quick-replies/Everywhere", json=menu)
    body = (await client.get(f"/chats/{chat}/quick-replies")).json()
    assert [s["name"] for s in body["sets"]] == ["Everywhere"]
    assert [s["name"] for s in body["linked"]] == ["Drafts"]
    await client.put(f"/chats/{chat}/quick-replies", json={"sets": [{"set": "Scene"}]})
    site.upstream.script(Reply(text="Dust."))
    auto = await client.post(
        f"/chats/{chat}/quick-replies/click",
        json={"set": "Scene", "label": "Look", "input": "Quietly,", "auto": True},
    )
    assert auto.status_code == 200, auto.text
    stored = await site.tk.chats.load(chat)
    assert [m.data["mes"] for m in stored.messages][-2:] == ["I look around. ", "Dust."]


async def test_the_global_list_and_a_chats_bindings_by_name(site: Site) -> None:
    chat = await _stock(site)
    client = site.client
    response = await client.put("/settings/quick-replies", json={"sets": ["Scene", "Drafts"]})
    assert response.json() == {"sets": ["Scene", "Drafts"]}
    await client.put(f"/chats/{chat}/quick-replies", json={"sets": [{"set": "Everywhere"}]})
    body = (await client.get(f"/chats/{chat}/quick-replies")).json()
    assert body["bindings"] == {
        "sets": ["Drafts", "Everywhere", "Scene"],
        "global": ["Scene", "Drafts"],
        "chat": ["Everywhere"],
        "character": [],
    }
    assert [s["name"] for s in body["sets"]] == ["Scene", "Drafts", "Everywhere"]
    refused = await client.put("/settings/quick-replies", json={"sets": ["Scene", "Gone"]})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "sets[1]"


async def test_binding_sets_to_a_character_keeps_the_sets_its_card_carries(site: Site) -> None:
    await _stock(site)
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Rhea",
            "first_mes": "Hi.",
            "extensions": {"quick_reply_sets": [qr_set("Rhea's", ("Roll", "/pass rolled"))]},
        },
    }
    await site.tk.library.import_bytes(json.dumps(card).encode(), source="rhea.json")
    bound = await site.client.put(
        "/characters/Rhea/quick-replies", json={"sets": ["Rhea's", "Scene"]}
    )
    assert bound.status_code == 200, bound.text
    record = await site.tk.store.get_record("character", "Rhea", owner=site.tk.owner)
    kept = record.data["data"]["extensions"]["quick_reply_sets"]
    assert kept[0]["name"] == "Rhea's" and kept[0]["qrList"][0]["label"] == "Roll"
    assert kept[1] == "Scene"


async def test_a_click_that_generates_counts_against_the_turn_rate(tmp_path: Path) -> None:
    conf = settings(tmp_path / "home", turn_rate=RateLimit(1, 60.0))
    async with HangingServer() as upstream, live_server(conf) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        upstream.script(Reply(text="One."), Reply(text="Two."))
        chat = (await tk.chats.new_chat("Mira")).id
        async with server.client() as client:
            made = await client.post("/quick-replies", json=qr_set("Go", ("Ask", "Well?")))
            assert made.status_code == 201, made.text
            await client.put(f"/chats/{chat}/quick-replies", json={"sets": [{"set": "Go"}]})
            url = f"/chats/{chat}/quick-replies/click"
            first = await client.post(url, json={"set": "Go", "label": "Ask"})
            second = await client.post(url, json={"set": "Go", "label": "Ask"})
    assert first.status_code == 200, first.text
    assert second.status_code == 429, second.text
    assert len(upstream.requests) == 1


async def test_a_reply_picked_from_a_chained_menu_runs_after_its_parent(site: Site) -> None:
    """SillyTavern's context menu: a chained link (``isChained``) runs the parent's message
    first and pipes it into the picked reply; an unchained one runs the reply alone; both
    read ``%%parent%%`` as the parent's label."""
    chat = await _stock(site)
    client = site.client
    menu = qr_set("Everywhere", ("Roll", "/pass 6"))
    menu["qrList"][0]["contextList"] = [
        {"set": "Dice", "isChained": True},
        {"set": "Loose", "isChained": False},
    ]
    await client.put("/quick-replies/Everywhere", json=menu)
    for name in ("Dice", "Loose"):
        body = qr_set(name, ("Double", "/mul {{pipe}} 2 | /pass got %%parent%% {{pipe}}"))
        assert (await client.post("/quick-replies", json=body)).status_code == 201
    url = f"/chats/{chat}/quick-replies/click"
    parent = {"set": "Everywhere", "label": "Roll"}
    chained = await client.post(url, json={"set": "Dice", "id": 1, "parent": parent})
    assert chained.status_code == 200, chained.text
    assert chained.json()["pipe"] == "got Roll 12"  # /pass 6 | /mul {{pipe}} 2 | …
    loose = (await client.post(url, json={"set": "Loose", "id": 1, "parent": parent})).json()
    assert loose["pipe"] == "got Roll 2"  # the reply alone: nothing piped in, /mul 2
    plain = (await client.post(url, json={"set": "Dice", "id": 1})).json()
    assert plain["pipe"] == "got %%parent%% 2"  # not from a menu: nothing replaced
    nowhere = await client.post(url, json={"set": "Dice", "id": 1, "parent": {"set": "Nope"}})
    assert nowhere.status_code == 422
