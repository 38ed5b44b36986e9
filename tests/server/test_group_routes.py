"""Groups and group turns over a real uvicorn on loopback with a scripted upstream: groups made,
edited (members, mutes, strategy) and deleted; a group chat opened with greetings; group turns
(send, trigger, regenerate) streaming each member's reply on the turn's SSE stream; 409 while
busy; DELETE stopping a group turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chat._server import HangReply, Reply

from ._cards import card
from ._site import Site, site
from ._sse import Event, parse_events

__all__ = ["site"]  # the fixture, used by name


async def _crew(site: Site, **fields: Any) -> dict[str, Any]:
    """Mira and Finn as the group ``Crew`` (list order: Mira first)."""
    await site.tk.library.import_bytes(json.dumps(card("Finn")).encode(), source="finn.json")
    r = await site.client.post(
        "/groups", json={"name": "Crew", "members": ["Mira", "Finn"], **fields}
    )
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


async def _group_chat(site: Site) -> str:
    r = await site.client.post("/groups/Crew/chats", json={})
    assert r.status_code == 201, r.text
    assert r.json()["message_count"] == 2  # each member's greeting
    return str(r.json()["id"])


async def _events(site: Site, url: str) -> list[Event]:
    response = await site.client.get(url)
    assert response.status_code == 200, response.text
    return parse_events(response.content)


def _by_member(events: list[Event]) -> list[tuple[str, str]]:
    """(member, its text) per member notice, in order."""
    out: list[tuple[str, str]] = []
    for e in events:
        if e.type == "notice" and e.data["kind"] == "member":
            out.append((e.data["name"], ""))
        elif e.type == "text":
            name, text = out[-1]
            out[-1] = (name, text + e.data["text"])
    return out


async def _stored(site: Site, chat: str) -> list[tuple[str, str]]:
    stored = await site.tk.chats.load(chat)
    return [(str(m.data["name"]), str(m.data["mes"])) for m in stored.messages]


async def test_a_group_is_made_edited_and_deleted(site: Site) -> None:
    made = await _crew(site, strategy="list")
    assert [(m["name"], m["muted"]) for m in made["members"]] == [
        ("Mira", False),
        ("Finn", False),
    ]
    assert made["strategy"] == "list" and made["mode"] == "swap" and made["missing"] == []
    c = site.client
    again = await c.post("/groups", json={"name": "Crew", "members": ["Mira"]})
    assert again.status_code == 409 and again.json()["error"]["type"] == "Conflict"
    listed = (await c.get("/groups")).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == made["id"]

    r = await c.patch(
        "/groups/Crew", json={"muted": ["Finn"], "strategy": "manual", "join_prefix": "<"}
    )
    assert r.status_code == 200, r.text
    edited = r.json()
    assert [(m["name"], m["muted"]) for m in edited["members"]] == [
        ("Mira", False),
        ("Finn", True),
    ]
    assert edited["strategy"] == "manual" and edited["join_prefix"] == "<"

    # a part that names nothing stores nothing
    for patch in ({"muted": ["Nobody"], "strategy": "pooled"}, {"members": ["Mira", "Ghost"]}):
        r = await c.patch("/groups/Crew", json=patch)
        assert r.status_code == 404, r.text
        assert (await c.get(f"/groups/{made['id']}")).json() == edited
    r = await c.patch("/groups/Crew", json={"strategy": "loud"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "body.strategy"

    # a new member list keeps the mutes of members that stay
    r = await c.patch("/groups/Crew", json={"members": ["Finn"]})
    assert [(m["name"], m["muted"]) for m in r.json()["members"]] == [("Finn", True)]

    assert (await c.delete("/groups/Crew")).status_code == 204
    assert (await c.get("/groups/Crew")).status_code == 404
    assert (await c.get("/groups")).json()["total"] == 0


async def test_a_group_turn_streams_each_member_and_stores_the_replies(site: Site) -> None:
    await _crew(site, strategy="list")
    chat = await _group_chat(site)
    site.upstream.script(Reply(text="Mira: all aboard."), Reply(text="Finn: ropes are in."))
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"text": "Hello"})
    assert r.status_code == 202, r.text
    started = r.json()
    assert started["events"] == f"/chats/{chat}/turns/{started['turn_id']}/events"
    events = await _events(site, started["events"])
    assert events[0].data == {
        "kind": "started",
        "turn": started["turn_id"],
        "chat": chat,
        "verb": "send",
    }
    assert _by_member(events) == [("Mira", "Mira: all aboard."), ("Finn", "Finn: ropes are in.")]
    done = events[-1]
    assert done.type == "done" and done.data["status"] == "completed"
    assert done.data["user_message_stored"] is True
    assert [(x["name"], x["status"]) for x in done.data["replies"]] == [
        ("Mira", "completed"),
        ("Finn", "completed"),
    ]
    assert (await _stored(site, chat))[-3:] == [
        ("Ada", "Hello"),
        ("Mira", "Mira: all aboard."),
        ("Finn", "Finn: ropes are in."),
    ]


async def test_trigger_reaches_a_muted_member_and_regenerate_replaces_the_batch(
    site: Site,
) -> None:
    await _crew(site, strategy="list")
    await site.client.patch("/groups/Crew", json={"muted": ["Finn"]})
    chat = await _group_chat(site)
    site.upstream.script(Reply(text="Finn, woken up."))
    r = await site.client.post(
        f"/chats/{chat}/group-turns", json={"kind": "trigger", "member": "Finn"}
    )
    assert r.status_code == 202, r.text
    events = await _events(site, r.json()["events"])
    assert _by_member(events) == [("Finn", "Finn, woken up.")]
    assert (await _stored(site, chat))[-1] == ("Finn", "Finn, woken up.")

    site.upstream.script(Reply(text="Mira again."))
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"kind": "regenerate"})
    events = await _events(site, r.json()["events"])
    assert events[-1].data["kind"] == "regenerate"
    stored = await _stored(site, chat)
    # Finn's batch went; the list strategy drafts the unmuted Mira
    assert stored[-1] == ("Mira", "Mira again.") and ("Finn", "Finn, woken up.") not in stored


async def test_swipe_continue_and_impersonate_in_a_group_chat(site: Site) -> None:
    await _crew(site, strategy="list")
    chat = await _group_chat(site)
    site.upstream.script(Reply(text="Mira here."), Reply(text="Finn here."))
    await _events(
        site, (await site.client.post(f"/chats/{chat}/group-turns", json={})).json()["events"]
    )
    after_send = await _stored(site, chat)
    assert after_send[-2:] == [("Mira", "Mira here."), ("Finn", "Finn here.")]

    site.upstream.script(Reply(text="Finn, once more."))
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"kind": "swipe"})
    events = await _events(site, r.json()["events"])
    assert _by_member(events) == [("Finn", "Finn, once more.")]  # the last speaker
    last = (await site.tk.chats.load(chat)).messages[-1].data
    assert last["swipes"] == ["Finn here.", "Finn, once more."] and last["swipe_id"] == 1

    site.upstream.script(Reply(text=" And the tide."))
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"kind": "continue"})
    await _events(site, r.json()["events"])
    assert (await _stored(site, chat))[-1] == ("Finn", "Finn, once more. And the tide.")

    before = await _stored(site, chat)
    site.upstream.script(Reply(text="Ada would say hi."))
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"kind": "impersonate"})
    events = await _events(site, r.json()["events"])
    assert events[-1].data["status"] == "completed"
    assert "".join(e.data["text"] for e in events if e.type == "text") == "Ada would say hi."
    assert await _stored(site, chat) == before  # an impersonation stores nothing


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"kind": "trigger"}, 400, "GenerateTaskError"),
        ({"kind": "trigger", "member": "Nobody"}, 404, "NotFound"),
        ({"kind": "sing"}, 422, "ValidationError"),
    ],
)
async def test_a_bad_group_turn_is_refused_before_it_starts(
    site: Site, body: dict[str, Any], status: int, error: str
) -> None:
    await _crew(site)
    chat = await _group_chat(site)
    before = await _stored(site, chat)
    r = await site.client.post(f"/chats/{chat}/group-turns", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["type"] == error
    assert await _stored(site, chat) == before
    assert not site.server.state.turns._running  # nothing started


async def test_a_solo_chat_has_no_group_turns(site: Site) -> None:
    chat = await site.new_chat()
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"text": "hi"})
    assert r.status_code == 404 and "no group" in r.json()["error"]["message"]


async def test_a_solo_turn_on_a_group_chat_is_409_before_it_starts(site: Site) -> None:
    await _crew(site)
    chat = await _group_chat(site)
    before = await _stored(site, chat)
    for kind in ("send", "regenerate", "impersonate"):
        r = await site.client.post(f"/chats/{chat}/turns", json={"kind": kind, "text": "hi"})
        assert r.status_code == 409, r.text
        assert r.json()["error"]["type"] == "Conflict" and "group" in r.json()["error"]["message"]
    assert await _stored(site, chat) == before
    assert not site.server.state.turns._running  # nothing started, the chat is not locked
    ok = await site.client.post(f"/chats/{chat}/group-turns", json={"text": "Go"})
    assert ok.status_code == 202, ok.text


async def test_a_busy_group_chat_is_409_and_delete_stops_the_turn(site: Site) -> None:
    await _crew(site, strategy="list")
    chat = await _group_chat(site)
    site.upstream.script(HangReply(text="Wait. and then", hang_after=1))
    started = (await site.client.post(f"/chats/{chat}/group-turns", json={"text": "Go"})).json()
    await site.watch_until_text(started["events"])
    busy = await site.client.post(f"/chats/{chat}/group-turns", json={"text": "Again"})
    assert busy.status_code == 409, busy.text
    solo = await site.client.post(f"/chats/{chat}/turns", json={"text": "Again"})
    assert solo.status_code == 409  # one chat lock, whichever route asks
    r = await site.client.delete(f"/chats/{chat}/turns/{started['turn_id']}")
    assert r.status_code == 200 and r.json() == {"stopped": True}
    events = await _events(site, started["events"])
    assert events[-1].data["status"] == "aborted"
    # the stopped batch ends at Mira: Finn never generated
    assert [x["name"] for x in events[-1].data["replies"]] == ["Mira"]
    site.upstream.release.set()
    await asyncio.sleep(0)


async def test_a_group_is_renamed_and_new_members_are_muted_in_one_edit(site: Site) -> None:
    made = await _crew(site, strategy="list")
    await site.tk.library.import_bytes(json.dumps(card("Juno")).encode(), source="juno.json")
    c = site.client
    r = await c.patch(
        "/groups/Crew",
        json={"name": "Deck", "members": ["Juno", "Finn", "Mira"], "muted": ["Juno"]},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == made["id"] and body["name"] == "Deck"
    assert [(m["name"], m["muted"]) for m in body["members"]] == [
        ("Juno", True),
        ("Finn", False),
        ("Mira", False),
    ]
    assert (await c.get("/groups/Deck")).json() == body
    assert (await c.get("/groups/Crew")).status_code == 404

    # a muted character that is not among the new members stores nothing
    r = await c.patch("/groups/Deck", json={"members": ["Mira"], "muted": ["Finn"]})
    assert r.status_code == 404, r.text
    assert (await c.get("/groups/Deck")).json() == body

    # another group's name is taken; the group's own name is not
    r = await c.post(
        "/groups", json={"name": "Other", "members": ["Mira", "Juno"], "muted": ["Juno"]}
    )
    assert [(m["name"], m["muted"]) for m in r.json()["members"]] == [
        ("Mira", False),
        ("Juno", True),
    ]
    r = await c.post("/groups", json={"name": "Third", "members": ["Mira"], "muted": ["Juno"]})
    assert r.status_code == 404 and (await c.get("/groups/Third")).status_code == 404
    r = await c.patch("/groups/Deck", json={"name": "Other"})
    assert r.status_code == 409 and r.json()["error"]["type"] == "Conflict"
    assert (await c.patch("/groups/Deck", json={"name": "Deck"})).status_code == 200


async def test_a_group_lists_its_chats_and_a_chat_names_its_group(site: Site) -> None:
    made = await _crew(site)
    first = await _group_chat(site)
    second = await _group_chat(site)
    r = await site.client.get("/groups/Crew/chats")
    assert r.status_code == 200, r.text
    listed = r.json()
    assert listed["total"] == 2
    assert {c["id"] for c in listed["items"]} == {first, second}
    assert all(c["message_count"] == 2 for c in listed["items"])

    r = await site.client.get(f"/chats/{first}/group")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == made["id"] and r.json()["name"] == "Crew"
    solo = await site.new_chat()
    r = await site.client.get(f"/chats/{solo}/group")
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound"


async def test_an_auto_mode_tick_has_a_member_go_on_without_a_user_message(site: Site) -> None:
    await _crew(site, strategy="manual")
    chat = await _group_chat(site)
    before = await _stored(site, chat)
    site.upstream.script(Reply(text="Nobody spoke, so I will."))
    r = await site.client.post(f"/chats/{chat}/group-turns", json={"auto": True})
    assert r.status_code == 202, r.text
    events = await _events(site, r.json()["events"])
    # the manual strategy drafts nobody for a send; an auto tick drafts one member
    [(name, text)] = _by_member(events)
    assert name in ("Mira", "Finn") and text == "Nobody spoke, so I will."
    assert events[-1].data["user_message_stored"] is False
    assert await _stored(site, chat) == [*before, (name, text)]

    for body in ({"auto": True, "text": "hi"}, {"auto": True, "kind": "swipe"}):
        r = await site.client.post(f"/chats/{chat}/group-turns", json=body)
        assert r.status_code == 400, r.text
        assert "auto-mode" in r.json()["error"]["message"]
