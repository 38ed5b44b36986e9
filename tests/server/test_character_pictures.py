"""Whether a character has a picture, said by the routes that point at one, so a browser never
asks for a missing image (a JSON card has none: its avatar and thumbnail answer 404): the list
line's ``has_avatar`` and its URLs (``None`` without one), the card's ``has_avatar``, and a
chat's ``character_thumbnail_url``; each follows an avatar's upload and removal."""

from __future__ import annotations

import io
from typing import Any

import httpx2 as httpx
from PIL import Image

from ._cards import card
from ._live import LiveServer


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
