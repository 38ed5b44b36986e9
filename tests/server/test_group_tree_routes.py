"""A group chat's tree over HTTP (a real server, a scripted upstream): a regenerate in the
middle of a group chat starts a branch at that reply, its writer speaks again (SillyTavern's
group rules choose when the writer has left the group), the old path stays a branch that
``GET /chats/{id}/tree`` lists and ``PUT /chats/{id}/path`` brings back, and the member's
prompt is built from the new path; a resend in the middle branches too."""

from __future__ import annotations

import json
from typing import Any

from chat._server import Reply

from ._cards import card
from ._site import Site, site
from ._sse import parse_events

__all__ = ["site"]  # the fixture, used by name


async def _crew_chat(site: Site) -> str:
    """Mira and Finn (the list strategy) and a chat of theirs with two batches: greetings
    0-1, then Ada/Mira/Finn twice (messages 2-7)."""
    await site.tk.library.import_bytes(json.dumps(card("Finn")).encode(), source="finn.json")
    made = await site.client.post(
        "/groups", json={"name": "Crew", "members": ["Mira", "Finn"], "strategy": "list"}
    )
    assert made.status_code == 201, made.text
    opened = await site.client.post("/groups/Crew/chats", json={})
    assert opened.status_code == 201, opened.text
    chat = str(opened.json()["id"])
    site.upstream.script(
        Reply(text="Mira: ropes."),
        Reply(text="Finn: anchor."),
        Reply(text="Mira: sails."),
        Reply(text="Finn: tide."),
    )
    for _ in range(2):
        await _group_turn(site, chat, text="Hello")
    return chat


async def _group_turn(site: Site, chat: str, **body: Any) -> dict[str, Any]:
    started = await site.client.post(f"/chats/{chat}/group-turns", json=body)
    assert started.status_code == 202, started.text
    response = await site.client.get(started.json()["events"])
    events = parse_events(response.content)
    done: dict[str, Any] = events[-1].data
    assert done["status"] == "completed", done
    return done


async def _stored(site: Site, chat: str) -> list[tuple[str, str]]:
    stored = await site.tk.chats.load(chat)
    return [(str(m.data["name"]), str(m.data["mes"])) for m in stored.messages]


async def _tree(site: Site, chat: str) -> dict[str, Any]:
    response = await site.client.get(f"/chats/{chat}/tree")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_regenerating_a_middle_reply_branches_and_its_writer_speaks_again(
    site: Site,
) -> None:
    chat = await _crew_chat(site)
    old = await _stored(site, chat)
    assert old[3:5] == [("Mira", "Mira: ropes."), ("Finn", "Finn: anchor.")]
    site.upstream.script(Reply(text="Finn: a new anchor."))
    done = await _group_turn(site, chat, kind="regenerate", at=4)
    # Finn wrote message 4, so Finn alone speaks, though the list strategy starts with Mira
    assert [r["name"] for r in done["replies"]] == ["Finn"]
    assert await _stored(site, chat) == [*old[:4], ("Finn", "Finn: a new anchor.")]
    # Finn's prompt is the new path: up to Mira's reply, nothing of what followed it
    sent = json.dumps(site.upstream.requests[-1].body)
    assert "Mira: ropes." in sent
    assert all(t not in sent for t in ("Finn: anchor.", "Mira: sails.", "Finn: tide."))

    tree = await _tree(site, chat)
    main, new = tree["branches"]
    assert tree["current"] == new["id"] and tree["message_count"] == 5
    assert (main["id"], main["fork"], main["length"], main["current"]) == ("main", 0, 8, False)
    assert (new["parent"], new["fork"], new["length"]) == ("main", 4, 1)
    (point,) = tree["points"]
    assert point["index"] == 4
    assert [(a["branch"], a["preview"]["text"]) for a in point["alternatives"]] == [
        ("main", "Finn: anchor."),
        (new["id"], "Finn: a new anchor."),
    ]

    switched = await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    assert switched.status_code == 200, switched.text
    assert await _stored(site, chat) == old  # the old path, whole
    await site.client.put(f"/chats/{chat}/path", json={"branch": new["id"]})
    site.upstream.script(Reply(text="Mira: onward."), Reply(text="Finn: aye."))
    await _group_turn(site, chat, text="Go on")
    sent = json.dumps(site.upstream.requests[-1].body)
    assert "Finn: a new anchor." in sent and "Mira: sails." not in sent


async def test_a_writer_who_left_the_group_gives_way_to_the_groups_rules(site: Site) -> None:
    chat = await _crew_chat(site)
    await site.client.patch("/groups/Crew", json={"members": ["Mira"]})
    site.upstream.script(Reply(text="Mira, in Finn's place."))
    done = await _group_turn(site, chat, kind="regenerate", at=4)
    assert [r["name"] for r in done["replies"]] == ["Mira"]
    assert (await _stored(site, chat))[4:] == [("Mira", "Mira, in Finn's place.")]


async def test_resending_in_the_middle_of_a_group_chat_branches_at_it(site: Site) -> None:
    chat = await _crew_chat(site)
    old = await _stored(site, chat)
    site.upstream.script(Reply(text="Mira: to port."), Reply(text="Finn: to port, aye."))
    await _group_turn(site, chat, text="Turn back", at=5)
    assert await _stored(site, chat) == [
        *old[:5],
        ("Ada", "Turn back"),
        ("Mira", "Mira: to port."),
        ("Finn", "Finn: to port, aye."),
    ]
    tree = await _tree(site, chat)
    assert [(b["fork"], b["length"]) for b in tree["branches"]] == [(0, 8), (5, 3)]


async def test_a_bad_branch_point_in_a_group_chat_is_refused_before_it_starts(
    site: Site,
) -> None:
    chat = await _crew_chat(site)
    for body in (
        {"kind": "regenerate", "at": 2},  # Ada's message
        {"kind": "regenerate", "at": 8},  # past the end
        {"kind": "swipe", "at": 4},
        {"kind": "trigger", "member": "Finn", "at": 4},
    ):
        refused = await site.client.post(f"/chats/{chat}/group-turns", json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["error"]["field"] == "at", refused.text
    assert [b["id"] for b in (await _tree(site, chat))["branches"]] == ["main"]
    assert len(await _stored(site, chat)) == 8
