"""Concurrent editors over a real uvicorn on loopback: every message, character and lorebook
entry carries a revision; a change that sends a stale one as ``If-Match`` is refused (409
``StaleRevision`` with the current revision; a message's current text) and writes nothing,
and a change that sends none is made as before."""

from __future__ import annotations

import asyncio
from typing import Any

from ._site import Site, site

__all__ = ["site"]  # the fixture, used by name


def _if(revision: str) -> dict[str, str]:
    return {"If-Match": f'"{revision}"'}


async def _message(site: Site, chat: str, index: int) -> dict[str, Any]:
    r = await site.client.get(f"/chats/{chat}/messages/{index}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_every_message_carries_a_revision_that_changes_with_it(site: Site) -> None:
    chat = await site.new_chat()
    listed = (await site.client.get(f"/chats/{chat}/messages")).json()["items"]
    revision = listed[0]["revision"]
    assert len(revision) == 16 and revision == (await _message(site, chat, 0))["revision"]
    r = await site.client.patch(f"/chats/{chat}/messages/0", json={"text": "Changed."})
    assert r.status_code == 200 and r.json()["revision"] not in ("", revision)
    assert r.json()["revision"] == (await _message(site, chat, 0))["revision"]


async def test_a_stale_edit_is_refused_and_writes_nothing(site: Site) -> None:
    chat = await site.new_chat()
    read = await _message(site, chat, 0)  # two tabs read the same message
    first = await site.client.patch(
        f"/chats/{chat}/messages/0", json={"text": "Tab one."}, headers=_if(read["revision"])
    )
    assert first.status_code == 200, first.text
    second = await site.client.patch(
        f"/chats/{chat}/messages/0", json={"text": "Tab two."}, headers=_if(read["revision"])
    )
    assert second.status_code == 409, second.text
    error = second.json()["error"]
    assert error["type"] == "StaleRevision"
    assert error["revision"] == first.json()["revision"]
    assert error["current"] == {"text": "Tab one."}
    assert await site.stored_reply(chat) == "Tab one."
    # with the current revision the edit goes through
    again = await site.client.patch(
        f"/chats/{chat}/messages/0", json={"text": "Tab two."}, headers=_if(error["revision"])
    )
    assert again.status_code == 200 and await site.stored_reply(chat) == "Tab two."


async def test_two_edits_of_one_revision_at_once_one_wins(site: Site) -> None:
    chat = await site.new_chat()
    revision = (await _message(site, chat, 0))["revision"]
    answers = await asyncio.gather(
        *(
            site.client.patch(
                f"/chats/{chat}/messages/0", json={"text": f"Tab {n}."}, headers=_if(revision)
            )
            for n in range(4)
        )
    )
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409, 409, 409], [a.text for a in answers]
    winner = next(a for a in answers if a.status_code == 200).json()["data"]["mes"]
    assert await site.stored_reply(chat) == winner


async def test_an_edit_without_a_revision_is_made_as_before(site: Site) -> None:
    chat = await site.new_chat()
    await site.client.patch(f"/chats/{chat}/messages/0", json={"text": "Elsewhere."})
    r = await site.client.patch(f"/chats/{chat}/messages/0", json={"text": "No check."})
    assert r.status_code == 200 and await site.stored_reply(chat) == "No check."


async def test_a_revision_of_another_message_is_stale(site: Site) -> None:
    # a tab that read message 1 and edits index 1 after message 0 went: another message
    chat = await site.new_chat()
    for text in ("First.", "Second."):
        r = await site.client.post(f"/chats/{chat}/messages", json={"name": "Ada", "text": text})
        assert r.status_code == 201
    read = await _message(site, chat, 1)
    assert (await site.client.delete(f"/chats/{chat}/messages/0")).status_code == 204
    r = await site.client.patch(
        f"/chats/{chat}/messages/1", json={"text": "Oops."}, headers=_if(read["revision"])
    )
    assert r.status_code == 409 and r.json()["error"]["current"] == {"text": "Second."}


async def test_a_stale_bare_if_match_is_refused_and_a_star_is_no_check(site: Site) -> None:
    chat = await site.new_chat()
    url = f"/chats/{chat}/messages/0"
    r = await site.client.patch(url, json={"text": "x"}, headers={"If-Match": "0123456789abcdef"})
    assert r.status_code == 409 and r.json()["error"]["type"] == "StaleRevision"
    r = await site.client.patch(url, json={"text": "Any."}, headers={"If-Match": "*"})
    assert r.status_code == 200 and await site.stored_reply(chat) == "Any."


async def test_a_stale_character_save_is_refused(site: Site) -> None:
    c = site.client
    read = (await c.get("/characters/Mira")).json()  # two editors read the card
    assert len(read["revision"]) == 16
    card = read["data"]
    first = {**card, "data": {**card["data"], "description": "From the first tab."}}
    r = await c.put("/characters/Mira", json=first, headers=_if(read["revision"]))
    assert r.status_code == 200, r.text
    saved = r.json()["revision"]
    assert (
        saved != read["revision"] and (await c.get("/characters/Mira")).json()["revision"] == saved
    )
    second = {**card, "data": {**card["data"], "description": "From the second tab."}}
    r = await c.put("/characters/Mira", json=second, headers=_if(read["revision"]))
    assert r.status_code == 409 and r.json()["error"]["type"] == "StaleRevision"
    assert r.json()["error"]["revision"] == saved
    stored = (await c.get("/characters/Mira")).json()["data"]["data"]["description"]
    assert stored == "From the first tab."
    # no If-Match: saved as before
    r = await c.put("/characters/Mira", json=second)
    assert (
        r.status_code == 200 and r.json()["data"]["data"]["description"] == "From the second tab."
    )


async def test_a_stale_lorebook_entry_change_is_refused(site: Site) -> None:
    c = site.client
    r = await c.post("/lorebooks", json={"name": "Atlas", "entries": {}})
    assert r.status_code == 201, r.text
    made = (await c.post("/lorebooks/Atlas/entries", json={"key": ["sea"]})).json()
    other = (await c.post("/lorebooks/Atlas/entries", json={"key": ["sky"]})).json()
    url = f"/lorebooks/Atlas/entries/{made['uid']}"
    read = (await c.get(url)).json()
    assert read["revision"] == made["revision"]
    r = await c.patch(url, json={"content": "First."}, headers=_if(read["revision"]))
    assert r.status_code == 200 and r.json()["revision"] != read["revision"]
    for method in ("PATCH", "PUT"):
        r = await c.request(method, url, json={"content": "Second."}, headers=_if(read["revision"]))
        assert r.status_code == 409 and r.json()["error"]["type"] == "StaleRevision"
    assert (await c.get(url)).json()["data"]["content"] == "First."
    # another entry's change leaves this one's revision as it was
    current = (await c.get(url)).json()["revision"]
    await c.patch(f"/lorebooks/Atlas/entries/{other['uid']}", json={"content": "Sky."})
    r = await c.patch(url, json={"content": "Third."}, headers=_if(current))
    assert r.status_code == 200 and r.json()["data"]["content"] == "Third."


async def test_a_stale_record_save_is_refused_for_each_document_kind(site: Site) -> None:
    c = site.client
    for path, body in (
        ("/personas", {"name": "Wren", "description": "A courier."}),
        ("/quick-replies", {"name": "Moves", "qrList": []}),
    ):
        r = await c.post(path, json=body)
        assert r.status_code == 201, r.text
        url = f"{path}/{r.json()['id']}"
        read = (await c.get(url)).json()
        assert read["revision"] == r.json()["revision"] != ""
        r = await c.put(url, json={**read["data"], "note": "first"}, headers=_if(read["revision"]))
        assert r.status_code == 200, r.text
        assert r.json()["revision"] == (await c.get(url)).json()["revision"] != read["revision"]
        r = await c.put(url, json={**read["data"], "note": "second"}, headers=_if(read["revision"]))
        assert r.status_code == 409 and r.json()["error"]["type"] == "StaleRevision", r.text
        assert (await c.get(url)).json()["data"]["note"] == "first"


async def test_a_stale_delete_keeps_the_message_now_at_that_index(site: Site) -> None:
    # two tabs show [greeting, First, Second]; one deletes First, the other then deletes
    # "message 1" as it read it: Second, now at index 1, stays
    chat = await site.new_chat()
    for text in ("First.", "Second."):
        await site.client.post(f"/chats/{chat}/messages", json={"name": "Ada", "text": text})
    read = await _message(site, chat, 1)
    url = f"/chats/{chat}/messages/1"
    assert (await site.client.delete(url, headers=_if(read["revision"]))).status_code == 204
    r = await site.client.delete(url, headers=_if(read["revision"]))
    assert r.status_code == 409 and r.json()["error"]["current"] == {"text": "Second."}
    assert await site.stored_reply(chat) == "Second."
    assert (await site.client.delete(url)).status_code == 204  # no If-Match: as before
    assert (await site.client.get(f"/chats/{chat}")).json()["message_count"] == 1


async def _with_swipes(site: Site, *swipes: str) -> str:
    """A chat whose message 1 is a reply with ``swipes`` (the first shown)."""
    chat = await site.new_chat()
    reply = {"name": "Mira", "is_user": False, "mes": swipes[0], "swipes": list(swipes)}
    await site.tk.store.append_message(chat, {**reply, "swipe_id": 0}, owner=site.tk.owner)
    return chat


async def test_a_stale_hide_or_swipe_choice_is_refused(site: Site) -> None:
    chat = await _with_swipes(site, "One.", "Two.")
    read = await _message(site, chat, 1)  # both tabs show swipe 0; one edits the message
    edited = await site.client.patch(f"/chats/{chat}/messages/1", json={"text": "Edited."})
    assert edited.status_code == 200
    hide = await site.client.put(
        f"/chats/{chat}/messages/1/hidden", json={"hidden": True}, headers=_if(read["revision"])
    )
    assert hide.status_code == 409 and hide.json()["error"]["type"] == "StaleRevision"
    pick = await site.client.put(
        f"/chats/{chat}/messages/1/swipe", json={"swipe": 1}, headers=_if(read["revision"])
    )
    assert pick.status_code == 409
    now = await _message(site, chat, 1)
    assert now["data"]["mes"] == "Edited." and not now["data"].get("is_system")
    # on the current revision both go through
    hide = await site.client.put(
        f"/chats/{chat}/messages/1/hidden", json={"hidden": True}, headers=_if(now["revision"])
    )
    assert hide.status_code == 200 and hide.json()["data"]["is_system"] is True
    pick = await site.client.put(
        f"/chats/{chat}/messages/1/swipe", json={"swipe": 1}, headers=_if(hide.json()["revision"])
    )
    assert pick.status_code == 200 and pick.json()["data"]["mes"] == "Two."


async def test_a_stale_swipe_delete_never_deletes_another_swipe(site: Site) -> None:
    # two tabs show swipes [A, B, C]; one deletes A, the other then deletes "swipe 1" as it
    # read it (B): C, now at 1, stays
    chat = await _with_swipes(site, "A.", "B.", "C.")
    read = await _message(site, chat, 1)
    url = f"/chats/{chat}/messages/1/swipes"
    first = await site.client.delete(f"{url}/0", headers=_if(read["revision"]))
    assert first.status_code == 204
    second = await site.client.delete(f"{url}/1", headers=_if(read["revision"]))
    assert second.status_code == 409
    assert (await _message(site, chat, 1))["data"]["swipes"] == ["B.", "C."]


async def test_a_stale_delete_from_keeps_the_chat(site: Site) -> None:
    chat = await site.new_chat()
    for text in ("First.", "Second."):
        await site.client.post(f"/chats/{chat}/messages", json={"name": "Ada", "text": text})
    read = await _message(site, chat, 1)
    await site.client.patch(f"/chats/{chat}/messages/1", json={"text": "First, edited."})
    url = f"/chats/{chat}/messages/from/1"
    r = await site.client.delete(url, headers=_if(read["revision"]))
    assert r.status_code == 409
    assert (await site.client.get(f"/chats/{chat}")).json()["message_count"] == 3
    current = (await _message(site, chat, 1))["revision"]
    assert (await site.client.delete(url, headers=_if(current))).status_code == 204
    assert (await site.client.get(f"/chats/{chat}")).json()["message_count"] == 1


async def test_a_revision_is_also_the_etag(site: Site) -> None:
    chat = await site.new_chat()
    message = await site.client.get(f"/chats/{chat}/messages/0")
    assert message.headers["etag"] == f'"{message.json()["revision"]}"'
    card = await site.client.get("/characters/Mira")
    assert card.headers["etag"] == f'"{card.json()["revision"]}"'
    persona = await site.client.post("/personas", json={"name": "Wren", "description": ""})
    read = await site.client.get(f"/personas/{persona.json()['id']}")
    assert read.headers["etag"] == f'"{read.json()["revision"]}"'
    # what a client kept from the ETag is what If-Match takes
    r = await site.client.patch(
        f"/chats/{chat}/messages/0",
        json={"text": "Changed."},
        headers={"If-Match": message.headers["etag"]},
    )
    assert r.status_code == 200
