"""The character editor's routes over a real uvicorn (local mode): create, replace keeping what
the editor does not show, rename through ``data.name``, the avatar upload (PNG, JPEG, WebP;
bad and oversized images refused by name), the favourite flag, tag filters and orders, and
the linked lorebooks."""

from __future__ import annotations

import io
from typing import Any

import httpx2 as httpx
from PIL import Image

from tavernkit.server.avatars import AVATAR_MAX_BYTES

from ._cards import LOREBOOK, card, card_file
from ._live import LiveServer


def _image(fmt: str, size: tuple[int, int] = (300, 300), colour: str = "teal") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format=fmt)
    return out.getvalue()


async def _new(c: httpx.AsyncClient, name: str, **data: Any) -> dict[str, Any]:
    body = card(name)
    body["data"].update(data)
    r = await c.post("/characters", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def test_create_names_its_errors_and_refuses_a_taken_name(local: LiveServer) -> None:
    async with local.client() as c:
        made = await _new(c, "  Nell ", tags=["sea"])
        assert made["name"] == "Nell" and made["data"]["data"]["name"] == "Nell"
        assert (await c.get("/characters/Nell")).json()["id"] == made["id"]
        r = await c.post("/characters", json=card("Nell"))
        assert r.status_code == 409 and r.json()["error"]["type"] == "Conflict"
        bad = card("Odd")
        bad["data"]["name"] = " "
        r = await c.post("/characters", json=bad)
        assert r.status_code == 422 and r.json()["error"]["field"] == "data.name"
        bad = card("Odd")
        bad["data"]["alternate_greetings"] = "hello"
        r = await c.post("/characters", json=bad)
        assert r.status_code == 422
        assert r.json()["error"]["field"].startswith("data.alternate_greetings")
        for ext, field in (
            ({"talkativeness": 2}, "data.extensions.talkativeness"),
            ({"talkativeness": "loud"}, "data.extensions.talkativeness"),
            ({"depth_prompt": {"prompt": "x", "depth": -1}}, "data.extensions.depth_prompt.depth"),
            (
                {"depth_prompt": {"prompt": "x", "role": "narrator"}},
                "data.extensions.depth_prompt.role",
            ),
        ):
            bad = card("Odd")
            bad["data"]["extensions"] = ext
            r = await c.post("/characters", json=bad)
            assert r.status_code == 422 and r.json()["error"]["field"] == field, (ext, r.text)
        names = [i["name"] for i in (await c.get("/characters")).json()["items"]]
        assert names == ["Nell"]


async def test_replace_keeps_unknown_fields_and_a_new_name_renames(local: LiveServer) -> None:
    async with local.client() as c:
        r = await c.post("/import", files={"file": card_file("Mira")})
        cid = r.json()[0]["id"]
        chat = (await c.post("/chats", json={"character": "Mira"})).json()["id"]
        stored = (await c.get(f"/characters/{cid}")).json()["data"]
        stored["name"] = "Mira"  # a V1 top-level copy, as SillyTavern writes
        stored["private"] = {"kept": True}
        stored["data"]["extensions"] = {"regex_scripts": [{"id": "r1"}], "talkativeness": "0.5"}
        stored["data"]["character_version"] = 3
        r = await c.put(f"/characters/{cid}", json=stored)
        assert r.status_code == 200, r.text

        edited = r.json()["data"]
        edited["data"]["name"] = "Mira Vale"
        edited["data"]["description"] = "She keeps the lighthouse."
        edited["data"]["extensions"]["depth_prompt"] = {
            "prompt": "Be brief.",
            "depth": 2,
            "role": "user",
        }
        r = await c.put(f"/characters/{cid}", json=edited)
        assert r.status_code == 200, r.text
        back = (await c.get(f"/characters/{cid}")).json()
        assert back["name"] == "Mira Vale"
        assert back["data"]["name"] == "Mira Vale"  # the V1 copy follows
        assert back["data"]["private"] == {"kept": True}
        assert back["data"]["data"]["extensions"]["regex_scripts"] == [{"id": "r1"}]
        assert back["data"]["data"]["character_version"] == 3
        assert (
            back["data"]["data"]["alternate_greetings"] == card("x")["data"]["alternate_greetings"]
        )
        assert (await c.get(f"/chats/{chat}")).json()["character_name"] == "Mira Vale"

        await _new(c, "Bea")
        edited["data"]["name"] = "Bea"
        r = await c.put(f"/characters/{cid}", json=edited)
        assert r.status_code == 409
        edited["data"]["name"] = "Mira Vale"
        edited["data"]["extensions"]["depth_prompt"]["depth"] = "deep"
        r = await c.put(f"/characters/{cid}", json=edited)
        assert r.status_code == 422
        assert r.json()["error"]["field"] == "data.extensions.depth_prompt.depth"
        assert (await c.get(f"/characters/{cid}")).json()["data"]["data"]["extensions"][
            "depth_prompt"
        ]["depth"] == 2


async def test_avatar_upload_in_three_formats_and_bad_images_named(local: LiveServer) -> None:
    async with local.client() as c:
        made = await _new(c, "Nell")
        cid = made["id"]
        assert (await c.get(f"/characters/{cid}/avatar")).status_code == 404
        before = (await c.get("/characters")).json()["items"][0]["thumbnail_url"]
        for fmt, media in (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
            r = await c.put(
                f"/characters/{cid}/avatar",
                content=_image(fmt, (400, 900)),
                headers={"content-type": media},
            )
            assert r.status_code == 200, (fmt, r.text)
            avatar = await c.get(f"/characters/{cid}/avatar")
            assert avatar.headers["content-type"] == "image/png"  # stored as a PNG card image
            assert Image.open(io.BytesIO(avatar.content)).size == (400, 900)
        line = (await c.get("/characters")).json()["items"][0]
        assert line["thumbnail_url"] != before  # a new URL: no browser shows the old image
        thumb = await c.get(line["thumbnail_url"])
        assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/webp"

        r = await c.put(
            f"/characters/{cid}/avatar", params={"crop": True}, content=_image("PNG", (900, 900))
        )
        assert r.status_code == 200
        avatar = (await c.get(f"/characters/{cid}/avatar")).content
        assert Image.open(io.BytesIO(avatar)).size == (600, 900)
        # the PNG export carries this image and the card
        png = (await c.get(f"/export/character/{cid}", params={"format": "png"})).content
        assert Image.open(io.BytesIO(png)).size == (600, 900)

        for content in (b"", b"not an image at all", _image("PNG")[:60], _image("GIF")):
            r = await c.put(f"/characters/{cid}/avatar", content=content)
            assert r.status_code == 422, r.text
            assert r.json()["error"] == {
                "type": "FormatError",
                "message": r.json()["error"]["message"],
                "field": "avatar",
                "code": "invalid",
                "params": {"field": "avatar"},
            }
        r = await c.put(f"/characters/{cid}/avatar", content=b"\0" * (AVATAR_MAX_BYTES + 1))
        assert r.status_code == 413 and r.json()["error"]["field"] == "avatar"
        huge = io.BytesIO()
        Image.new("1", (9000, 9000)).save(huge, format="PNG")  # small file, many pixels
        r = await c.put(f"/characters/{cid}/avatar", content=huge.getvalue())
        assert r.status_code == 413 and "pixels" in r.json()["error"]["message"]
        # the last good avatar is still there
        avatar = (await c.get(f"/characters/{cid}/avatar")).content
        assert Image.open(io.BytesIO(avatar)).size == (600, 900)

        assert (await c.delete(f"/characters/{cid}/avatar")).status_code == 204
        assert (await c.get(f"/characters/{cid}/avatar")).status_code == 404
        r = await c.put("/characters/Nobody/avatar", content=_image("PNG"))
        assert r.status_code == 404


async def test_favourites_tags_and_orders(local: LiveServer) -> None:
    async with local.client() as c:
        await _new(c, "Ann", tags=["Sea", "town"])
        await _new(c, "bea", tags=["sea"])
        cid = (await _new(c, "Cid", tags=["forest"]))["id"]
        r = await c.put(f"/characters/{cid}/fav", json={"fav": True})
        assert r.status_code == 200 and r.json()["fav"] is True and r.json()["tags"] == ["forest"]
        stored = (await c.get(f"/characters/{cid}")).json()["data"]
        assert stored["data"]["extensions"]["fav"] is True

        async def names(**params: Any) -> list[str]:
            r = await c.get("/characters", params=params)
            assert r.status_code == 200, r.text
            return [i["name"] for i in r.json()["items"]]

        assert await names() == ["Ann", "bea", "Cid"]  # by name unless told otherwise
        assert await names(sort="name") == ["Ann", "bea", "Cid"]
        assert await names(sort="name_desc") == ["Cid", "bea", "Ann"]
        assert await names(sort="newest") == ["Cid", "bea", "Ann"]
        assert await names(sort="oldest") == ["Ann", "bea", "Cid"]
        assert await names(sort="fav") == ["Cid", "Ann", "bea"]
        assert await names(fav=True) == ["Cid"]
        assert await names(fav=False, sort="name") == ["Ann", "bea"]
        assert await names(tag="SEA", sort="name") == ["Ann", "bea"]
        assert await names(tag=["sea", "town"]) == ["Ann"]
        assert await names(tag="nothing") == []
        assert await names(q="e", tag="sea") == ["bea"]
        # a chat makes its character the most recently chatted
        await c.post("/chats", json={"character": "bea"})
        assert await names(sort="chatted") == ["bea", "Ann", "Cid"]

        page = (await c.get("/characters", params={"facets": True, "limit": 1})).json()
        assert page["tags"] == [
            {"name": "Sea", "count": 2},
            {"name": "forest", "count": 1},
            {"name": "town", "count": 1},
        ]
        assert len(page["items"]) == 1 and page["total"] == 3
        assert (await c.get("/characters")).json()["tags"] is None

        # an edit of the tags is seen at once (the cache is keyed by the update time)
        card_json = (await c.get(f"/characters/{cid}")).json()["data"]
        card_json["data"]["tags"] = ["sea"]
        assert (await c.put(f"/characters/{cid}", json=card_json)).status_code == 200
        assert await names(tag="sea", sort="name") == ["Ann", "bea", "Cid"]
        assert (await c.put(f"/characters/{cid}/fav", json={"fav": False})).json()["fav"] is False
        assert await names(fav=True) == []
        r = await c.get("/characters", params={"sort": "random"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query.sort"


async def test_linked_lorebooks(local: LiveServer) -> None:
    async with local.client() as c:
        await _new(c, "Nell")
        for name in ("Harbour", "Tides"):
            r = await c.post("/lorebooks", json={**LOREBOOK, "name": name})
            assert r.status_code == 201
        assert (await c.get("/characters/Nell/lorebooks")).json() == []
        r = await c.put("/characters/Nell/lorebooks", json={"books": ["Tides", "Harbour"]})
        assert r.status_code == 200 and [b["name"] for b in r.json()] == ["Tides", "Harbour"]
        r = await c.put("/characters/Nell/lorebooks", json={"books": ["Harbour", "Nope"]})
        assert r.status_code == 404
        linked = (await c.get("/characters/Nell/lorebooks")).json()
        assert [b["name"] for b in linked] == ["Tides", "Harbour"]
        r = await c.put("/characters/Nell/lorebooks", json={"books": ["Harbour"]})
        assert [b["name"] for b in r.json()] == ["Harbour"]
        r = await c.put("/characters/Nell/lorebooks", json={"books": []})
        assert r.json() == [] and (await c.get("/characters/Nell/lorebooks")).json() == []
