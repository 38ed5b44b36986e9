"""The chat tree over HTTP (a real server, a scripted upstream): a regenerate or a resend in
the middle of a chat starts a branch and keeps the old continuation, ``GET /chats/{id}/tree``
lists the branches, ``PUT /chats/{id}/path`` switches the path every other route reads (the
messages, the next turn's prompt, the ``.jsonl`` export), the whole tree exports as one JSON
document, and bad ids or positions get typed errors naming what was wrong."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from chat._server import HangReply, Reply

from ._site import Site, site
from ._sse import parse_events

__all__ = ["site"]  # the fixture, used by name


async def _turn(site: Site, chat: str, **body: Any) -> None:
    started = await site.start(chat, **body)
    assert started.status_code == 202, started.text
    response = await site.client.get(started.json()["events"])
    events = parse_events(response.content)
    assert events[-1].data["status"] == "completed", events[-1].data


async def _texts(site: Site, chat: str) -> list[str]:
    stored = await site.tk.chats.load(chat)
    return [str(m.data["mes"]) for m in stored.messages]


async def _three_turn_chat(site: Site) -> str:
    """greeting, then Hello/one, Hello/two, Hello/three: 7 messages."""
    site.upstream.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    chat = await site.new_chat()
    for _ in range(3):
        await _turn(site, chat)
    assert (await _texts(site, chat))[2::2] == ["one", "two", "three"]
    return chat


async def _tree(site: Site, chat: str) -> dict[str, Any]:
    response = await site.client.get(f"/chats/{chat}/tree")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _request_messages(site: Site, chat: str) -> list[Any]:
    response = await site.client.get(f"/ui/chats/{chat}/inspect", params={"kind": "normal"})
    assert response.status_code == 200, response.text
    messages: list[Any] = response.json()["request"]["messages"]
    return messages


async def test_regenerating_a_middle_reply_branches_and_keeps_the_old_one(site: Site) -> None:
    chat = await _three_turn_chat(site)
    old = await _texts(site, chat)
    site.upstream.script(Reply(text="two, again"))
    await _turn(site, chat, kind="regenerate", at=4)
    # the model saw the path up to the regenerated reply, not what followed it
    sent = json.dumps(site.upstream.requests[-1].body)
    assert "one" in sent and "two" not in sent and "three" not in sent
    assert await _texts(site, chat) == [*old[:4], "two, again"]

    tree = await _tree(site, chat)
    main, new = tree["branches"]
    assert tree["current"] == new["id"] and tree["message_count"] == 5
    assert (main["id"], main["parent"], main["fork"], main["length"]) == ("main", None, 0, 7)
    assert (main["on_path"], main["current"]) == (True, False)
    assert (new["parent"], new["fork"], new["length"], new["current"]) == ("main", 4, 1, True)
    assert new["preview"] == {"name": "Mira", "is_user": False, "text": "two, again"}
    (point,) = tree["points"]
    assert point["index"] == 4
    assert [(a["branch"], a["preview"]["text"], a["on_path"]) for a in point["alternatives"]] == [
        ("main", "two", False),
        (new["id"], "two, again", True),
    ]

    switched = await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    assert switched.status_code == 200, switched.text
    assert switched.json()["current"] == "main"
    assert [a["on_path"] for a in switched.json()["points"][0]["alternatives"]] == [True, False]
    assert await _texts(site, chat) == old
    listed = await site.client.get(f"/chats/{chat}/messages", params={"limit": 1})
    assert listed.json()["items"][0]["data"]["mes"] == "three"

    await site.client.put(f"/chats/{chat}/path", json={"branch": new["id"]})
    assert await _texts(site, chat) == [*old[:4], "two, again"]


async def test_resending_an_edited_message_branches_at_it(site: Site) -> None:
    chat = await _three_turn_chat(site)
    old = await _texts(site, chat)
    site.upstream.script(Reply(text="to the lighthouse"))
    await _turn(site, chat, text="Where now?", at=3)
    assert await _texts(site, chat) == [*old[:3], "Where now?", "to the lighthouse"]
    tree = await _tree(site, chat)
    assert [(b["fork"], b["length"]) for b in tree["branches"]] == [(0, 7), (3, 2)]
    assert tree["branches"][1]["preview"]["is_user"] is True


async def test_the_next_turns_prompt_follows_the_current_path(site: Site) -> None:
    chat = await _three_turn_chat(site)
    before = await _request_messages(site, chat)
    site.upstream.script(Reply(text="a different two"))
    await _turn(site, chat, kind="regenerate", at=4)
    on_branch = json.dumps(await _request_messages(site, chat))
    assert "a different two" in on_branch and "three" not in on_branch
    await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    assert await _request_messages(site, chat) == before  # exactly the unbranched prompt


async def test_the_current_path_exports_as_before_and_the_tree_as_one_document(
    site: Site,
) -> None:
    chat = await _three_turn_chat(site)
    export = f"/export/chat/{chat}"
    unbranched = await site.client.get(export, params={"format": "jsonl"})
    assert unbranched.status_code == 200
    whole = (await site.client.get(f"/chats/{chat}/tree/export")).json()
    assert [b["id"] for b in whole["branches"]] == ["main"]
    assert len(whole["branches"][0]["messages"]) == 7

    forked = await site.client.post(f"/chats/{chat}/tree", json={"index": 2})
    assert forked.status_code == 201, forked.text
    branch = forked.json()["current"]
    await site.client.post(f"/chats/{chat}/messages", json={"name": "Mira", "text": "other"})
    on_branch = await site.client.get(export, params={"format": "jsonl"})
    lines = on_branch.content.decode().splitlines()
    assert [json.loads(line).get("mes") for line in lines[1:]][-1] == "other"
    assert len(lines) == 1 + 3

    document = (await site.client.get(f"/chats/{chat}/tree/export")).json()
    assert document["format"] == "tavernkit-chat-tree" and document["version"] == 1
    assert document["current"] == branch
    main, other = document["branches"]
    assert [m["mes"] for m in main["messages"]][2::2] == ["one", "two", "three"]
    assert (other["parent"], other["fork"]) == ("main", 2)
    assert [m["mes"] for m in other["messages"]] == ["other"]

    await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    again = await site.client.get(export, params={"format": "jsonl"})
    assert again.content == unbranched.content  # byte for byte


async def test_bad_branch_ids_and_positions_are_typed_errors(site: Site) -> None:
    chat = await _three_turn_chat(site)
    missing = await site.client.put(f"/chats/{chat}/path", json={"branch": "nope"})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "NotFound"
    assert "nope" in missing.json()["error"]["message"]

    assert (await site.client.get("/chats/no-such-chat/tree")).status_code == 404
    past = await site.client.post(f"/chats/{chat}/tree", json={"index": 7})
    assert past.status_code == 422
    assert past.json()["error"]["field"] == "index"
    zero = await site.client.post(f"/chats/{chat}/tree", json={"index": 0})
    assert zero.status_code == 422 and zero.json()["error"]["type"] == "ValidationError"

    on_user = await site.start(chat, kind="regenerate", at=3)
    assert on_user.status_code == 422, on_user.text
    assert on_user.json()["error"]["field"] == "at"
    on_swipe = await site.start(chat, kind="swipe", at=4)
    assert on_swipe.status_code == 422 and on_swipe.json()["error"]["field"] == "at"
    assert [b["id"] for b in (await _tree(site, chat))["branches"]] == ["main"]
    assert len(await _texts(site, chat)) == 7


async def test_deleting_an_earlier_message_keeps_every_branch(site: Site) -> None:
    chat = await _three_turn_chat(site)
    site.upstream.script(Reply(text="two, again"))
    await _turn(site, chat, kind="regenerate", at=4)
    branch = (await _tree(site, chat))["current"]
    await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    deleted = await site.client.delete(f"/chats/{chat}/messages/1")
    assert deleted.status_code == 204, deleted.text
    tree = await _tree(site, chat)
    assert [(b["id"], b["fork"], b["length"]) for b in tree["branches"]] == [
        ("main", 0, 6),
        (branch, 3, 1),
    ]
    assert tree["points"][0]["index"] == 3
    await site.client.put(f"/chats/{chat}/path", json={"branch": branch})
    texts = await _texts(site, chat)
    assert texts[1:] == ["one", "Hello", "two, again"]


async def test_deleting_all_of_a_branch_the_path_passes_through_removes_it(site: Site) -> None:
    chat = await _three_turn_chat(site)
    site.upstream.script(Reply(text="two, again"), Reply(text="four"), Reply(text="four, again"))
    await _turn(site, chat, kind="regenerate", at=4)
    middle = (await _tree(site, chat))["current"]
    await _turn(site, chat)
    await _turn(site, chat, kind="regenerate", at=6)
    last = (await _tree(site, chat))["current"]
    await site.client.put(f"/chats/{chat}/path", json={"branch": middle})
    cut = await site.client.delete(f"/chats/{chat}/messages/from/6")
    assert cut.status_code == 204, cut.text
    await site.client.put(f"/chats/{chat}/path", json={"branch": last})
    assert (await _texts(site, chat))[4:] == ["two, again", "Hello", "four, again"]

    for _ in range(2):  # "two, again" and "Hello": all that the middle branch held
        deleted = await site.client.delete(f"/chats/{chat}/messages/4")
        assert deleted.status_code == 204, deleted.text
    tree = await _tree(site, chat)
    assert [(b["id"], b["parent"], b["fork"], b["length"]) for b in tree["branches"]] == [
        ("main", None, 0, 7),
        (last, "main", 4, 1),
    ]
    assert (await _texts(site, chat))[3:] == ["Hello", "four, again"]
    await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    assert (await _texts(site, chat))[4:] == ["two", "Hello", "three"]


async def test_regenerating_a_last_reply_a_branch_continues_keeps_the_branch(site: Site) -> None:
    chat = await _three_turn_chat(site)
    site.upstream.script(Reply(text="four"), Reply(text="aside"), Reply(text="three, again"))
    await _turn(site, chat)
    await _turn(site, chat, text="Other", at=7)  # a branch continuing "three"
    other = (await _tree(site, chat))["current"]
    await site.client.put(f"/chats/{chat}/path", json={"branch": "main"})
    cut = await site.client.delete(f"/chats/{chat}/messages/from/7")
    assert cut.status_code == 204, cut.text
    assert (await _texts(site, chat))[-1] == "three"

    await _turn(site, chat, kind="regenerate")
    assert (await _texts(site, chat))[-1] == "three, again"
    await site.client.put(f"/chats/{chat}/path", json={"branch": other})
    assert (await _texts(site, chat))[5:] == ["Hello", "three", "Other", "aside"]


async def test_a_fork_or_a_switch_waits_for_the_running_turn(site: Site) -> None:
    chat = await _three_turn_chat(site)
    site.upstream.script(HangReply(text="Wait. still writing", hang_after=1))
    started = (await site.start(chat)).json()
    await asyncio.wait_for(site.upstream.hanging.wait(), 10)
    for method, url, body in (
        ("PUT", f"/chats/{chat}/path", {"branch": "main"}),
        ("POST", f"/chats/{chat}/tree", {"index": 2}),
    ):
        busy = await site.client.request(method, url, json=body)
        assert busy.status_code == 409, busy.text
        assert busy.json()["error"]["type"] == "ChatBusy"
    site.upstream.release.set()
    await asyncio.wait_for(site.server.state.turns.wait(started["turn_id"]), 10)
    assert (await site.client.post(f"/chats/{chat}/tree", json={"index": 2})).status_code == 201
