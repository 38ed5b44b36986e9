"""Whether a character has a picture, said by the routes that point at one, so a browser never
asks for a missing image (a JSON card has none: its avatar and thumbnail answer 404): the list
line's ``has_avatar`` and its URLs (``None`` without one), the card's ``has_avatar``, and a
chat's ``character_thumbnail_url``; each follows an avatar's upload and removal. A page of
lines, and a page of groups, asks the store once which of its characters have a picture
(counted at the store's trace: every statement), on SQLite and on PostgreSQL."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx2 as httpx
from PIL import Image

from tavernkit.store.sqlite import SqliteStore

from ._cards import card
from ._live import LiveServer, live_server
from .conftest import settings


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (200, 300), "teal").save(out, format="PNG")
    return out.getvalue()


async def _pictures(c: httpx.AsyncClient, cid: str, chat: str) -> dict[str, Any]:
    """What the list line, the card and the chat say of the character's picture."""
    line = (await c.get("/characters")).json()["items"][0]
    whole = (await c.get(f"/characters/{cid}")).json()
    opened = (await c.get(f"/chats/{chat}")).json()
    return {
        "line": (line["has_avatar"], line["avatar_url"], line["thumbnail_url"]),
        "card": whole["has_avatar"],
        "chat": opened["character_thumbnail_url"],
    }


async def test_a_json_card_points_at_no_picture_until_it_has_one(local: LiveServer) -> None:
    async with local.client() as c:
        made = await c.post("/characters", json=card("Nell"))
        assert made.status_code == 201, made.text
        cid = made.json()["id"]
        chat = (await c.post("/chats", json={"character": "Nell"})).json()["id"]
        assert await _pictures(c, cid, chat) == {
            "line": (False, None, None),
            "card": False,
            "chat": None,
        }

        put = await c.put(f"/characters/{cid}/avatar", content=_png())
        assert put.status_code == 200, put.text
        assert put.json()["has_avatar"] is True
        seen = await _pictures(c, cid, chat)
        has, avatar_url, thumbnail_url = seen["line"]
        assert has is True and seen["card"] is True
        assert (await c.get(avatar_url)).headers["content-type"] == "image/png"
        for url in (thumbnail_url, seen["chat"]):
            thumb = await c.get(url)
            assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/webp"

        assert (await c.delete(f"/characters/{cid}/avatar")).status_code == 204
        assert await _pictures(c, cid, chat) == {
            "line": (False, None, None),
            "card": False,
            "chat": None,
        }


async def test_a_chat_whose_character_is_gone_points_at_no_picture(local: LiveServer) -> None:
    async with local.client() as c:
        cid = (await c.post("/characters", json=card("Nell"))).json()["id"]
        await c.put(f"/characters/{cid}/avatar", content=_png())
        chat = (await c.post("/chats", json={"character": "Nell"})).json()["id"]
        assert (await c.get(f"/chats/{chat}")).json()["character_thumbnail_url"]
        assert (await c.delete(f"/characters/{cid}")).status_code == 204
        opened = await c.get(f"/chats/{chat}")
        assert opened.status_code == 200
        assert opened.json()["character_thumbnail_url"] is None


async def test_a_group_names_each_members_thumbnail_where_it_has_one(local: LiveServer) -> None:
    async with local.client() as c:
        nell = (await c.post("/characters", json=card("Nell"))).json()["id"]
        orla = (await c.post("/characters", json=card("Orla"))).json()["id"]
        await c.put(f"/characters/{orla}/avatar", content=_png())
        made = await c.post("/groups", json={"name": "Crew", "members": [nell, orla]})
        assert made.status_code == 201, made.text
        for body in (made.json(), (await c.get("/groups/Crew")).json()):
            pictures = {m["name"]: m["thumbnail_url"] for m in body["members"]}
            assert pictures["Nell"] is None
            thumb = await c.get(pictures["Orla"])
            assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/webp"


async def _crew(c: httpx.AsyncClient) -> list[str]:
    """Six characters, every other one with a picture (cached by its upload), the others
    JSON cards (never cached: a re-import as a PNG adds a picture without a write)."""
    ids: list[str] = []
    for i in range(6):
        made = await c.post("/characters", json=card(f"Hand {i}"))
        assert made.status_code == 201, made.text
        ids.append(made.json()["id"])
        if i % 2:
            assert (await c.put(f"/characters/{ids[-1]}/avatar", content=_png())).is_success
    return ids


async def _asks_once_per_page(server: LiveServer) -> None:
    store = server.state.tavern.store
    assert isinstance(store, SqliteStore)  # PostgreSQL's store is one too, on its driver
    async with server.client() as c:
        ids = await _crew(c)
        for n in (0, 1):  # the first and second crews of three
            members = ids[n * 3 : n * 3 + 3]
            made = await c.post("/groups", json={"name": f"Crew {n}", "members": members})
            assert made.status_code == 201, made.text
        seen: list[str] = []
        async with store.trace(seen.append):
            page = (await c.get("/characters", params={"limit": 20})).json()
        asked = [sql for sql in seen if "record_blobs" in sql]
        assert len(asked) == 1, asked
        assert {line["name"]: line["has_avatar"] for line in page["items"]} == {
            f"Hand {i}": bool(i % 2) for i in range(6)
        }
        seen.clear()
        async with store.trace(seen.append):
            groups = (await c.get("/groups")).json()["items"]
        asked = [sql for sql in seen if "record_blobs" in sql]
        assert len(asked) == 1, asked
        pictured = {m["name"]: m["thumbnail_url"] is not None for g in groups for m in g["members"]}
        assert pictured == {f"Hand {i}": bool(i % 2) for i in range(6)}


async def test_a_page_asks_the_store_once_which_characters_have_pictures(
    local: LiveServer,
) -> None:
    await _asks_once_per_page(local)


async def test_on_postgresql_a_page_asks_once_which_characters_have_pictures(
    tmp_path: Path, postgres_url: str
) -> None:
    async with live_server(settings(tmp_path / "home", database=postgres_url)) as server:
        await _asks_once_per_page(server)
