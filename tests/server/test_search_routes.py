"""``GET /search/messages``: the caller's messages by their text, as a page of hits that open
the chat at the message; a blank query is a 422 naming ``q``; users are kept apart."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from ._cards import card_file
from ._live import LiveServer
from .conftest import Users


async def _chat_with(c: httpx.AsyncClient, texts: list[str], name: str | None = None) -> str:
    r = await c.post("/chats", json={"character": "Mira", **({"name": name} if name else {})})
    assert r.status_code == 201, r.text
    chat = str(r.json()["id"])
    for n, text in enumerate(texts):
        body = {"name": "ann" if n % 2 == 0 else "Mira", "text": text, "is_user": n % 2 == 0}
        assert (await c.post(f"/chats/{chat}/messages", json=body)).status_code == 201
    return chat


async def test_hits_open_the_chat_at_the_message(local: LiveServer) -> None:
    async with local.client() as c:
        assert (await c.post("/import", files={"file": card_file("Mira")})).status_code == 201
        first = await _chat_with(c, ["Where is the lighthouse?", "North, past the LIGHTHOUSE."])
        second = await _chat_with(c, ["lighthouse keepers", "none here"], name="Second")
        r = await c.get("/search/messages", params={"q": "lighthouse"})
        assert r.status_code == 200, r.text
        page = r.json()
        assert (page["total"], page["offset"]) == (3, 0)
        # the chat updated last comes first
        assert [(h["chat_id"], h["index"]) for h in page["items"]] == [
            (second, 1),
            (first, 2),
            (first, 1),
        ]
        hit = page["items"][1]
        assert hit == {
            "chat_id": first,
            "chat_name": hit["chat_name"],
            "character_id": hit["character_id"],
            "character_name": "Mira",
            "message_id": hit["message_id"],
            "index": 2,
            "name": "Mira",
            "is_user": False,
            "snippet": "North, past the LIGHTHOUSE.",
        }
        opened = (await c.get(f"/chats/{hit['chat_id']}/messages/{hit['index']}")).json()
        assert opened["id"] == hit["message_id"]
        assert opened["data"]["mes"] == "North, past the LIGHTHOUSE."
        # one chat (by id or name), pages
        r = await c.get("/search/messages", params={"q": "lighthouse", "chat": "Second"})
        assert [h["chat_id"] for h in r.json()["items"]] == [second]
        r = await c.get("/search/messages", params={"q": "lighthouse", "chat": first})
        assert r.json()["total"] == 2
        r = await c.get("/search/messages", params={"q": "lighthouse", "limit": 1, "offset": 1})
        assert r.json()["total"] == 3 and [h["index"] for h in r.json()["items"]] == [2]
        r = await c.get("/search/messages", params={"q": "lighthouse", "character": "Mira"})
        assert r.json()["total"] == 3
        # an edit is found at once, its old text no more
        r = await c.patch(f"/chats/{first}/messages/2", json={"text": "South, by the mill."})
        assert r.status_code == 200
        r = await c.get("/search/messages", params={"q": "mill", "chat": first})
        assert [h["index"] for h in r.json()["items"]] == [2]
        # nothing named: 404
        for params in ({"chat": "nope"}, {"character": "Nobody"}):
            r = await c.get("/search/messages", params={"q": "lighthouse", **params})
            assert r.status_code == 404, r.text


@pytest.mark.parametrize("q", ["", "   ", "\t\n"])
async def test_a_blank_query_is_a_422_naming_q(local: LiveServer, q: str) -> None:
    async with local.client() as c:
        r = await c.get("/search/messages", params={"q": q})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["type"] == "ValidationError" and error["field"] == "query.q"
        r = await c.get("/search/messages")
        assert r.status_code == 422 and r.json()["error"]["field"] == "query.q"


async def test_query_syntax_is_searched_as_text(local: LiveServer) -> None:
    async with local.client() as c:
        assert (await c.post("/import", files={"file": card_file("Mira")})).status_code == 201
        await _chat_with(c, ['she said "AND (" twice'])
        for q in ['"', "AND (", "NEAR(", "*", "'", "a:* | !b"]:
            r = await c.get("/search/messages", params={"q": q})
            assert r.status_code == 200, (q, r.text)
        r = await c.get("/search/messages", params={"q": 'said "AND ('})
        assert r.json()["total"] == 1


async def test_a_user_searches_their_own_messages_only(users: Users) -> None:
    ann, bob = users.ann, users.bob
    for client, who in ((ann, "ann"), (bob, "bob")):
        assert (await client.post("/import", files={"file": card_file("Mira")})).status_code == 201
        await _chat_with(client, [f"{who}'s treasure map"], name=f"{who}'s chat")
    ann_chat = (await ann.get("/chats")).json()["items"][0]["id"]
    r = await bob.get("/search/messages", params={"q": "treasure"})
    assert [h["snippet"] for h in r.json()["items"]] == ["bob's treasure map"]
    r = await bob.get("/search/messages", params={"q": "ann's"})
    assert r.json() == {"items": [], "total": 0, "offset": 0, "limit": r.json()["limit"]}
    r = await bob.get("/search/messages", params={"q": "treasure", "chat": ann_chat})
    assert r.status_code == 404
    r = await bob.get("/search/messages", params={"q": "treasure", "chat": "ann's chat"})
    assert r.status_code == 404
    r = await ann.get("/search/messages", params={"q": "treasure"})
    assert [h["chat_id"] for h in r.json()["items"]] == [ann_chat]
