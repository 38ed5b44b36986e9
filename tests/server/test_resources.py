"""The REST resources over a real uvicorn (local mode): paged characters with thumbnails,
documents, write-only keys, chats edited one row at a time, variables, import and export."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx2 as httpx
import pytest
from PIL import Image

from tavernkit.formats.cards import card_to_png
from tavernkit.library import EXPORT_FORMATS
from tavernkit.models.character import Card
from tavernkit.server.routes.transfer import ExportFormat, ExportKind

from . import _cards
from ._cards import LOREBOOK, PRESET, card_file
from ._live import LiveServer, live_server
from .conftest import settings


async def _import_card(c: httpx.AsyncClient, name: str) -> str:
    r = await c.post("/import", files={"file": card_file(name)})
    assert r.status_code == 201, r.text
    return str(r.json()[0]["id"])


async def test_characters_page_without_cards(local: LiveServer) -> None:
    async with local.client() as c:
        for name in ("Ann", "Bea", "Cid"):
            await _import_card(c, name)
        r = await c.get("/characters", params={"limit": 2})
        page = r.json()
        assert page["total"] == 3 and page["limit"] == 2
        assert [i["name"] for i in page["items"]] == ["Ann", "Bea"]
        assert all("data" not in i for i in page["items"])  # a line, never the card
        r = await c.get("/characters", params={"offset": 2, "limit": 2})
        assert [i["name"] for i in r.json()["items"]] == ["Cid"]
        r = await c.get("/characters", params={"q": "E"})
        assert [i["name"] for i in r.json()["items"]] == ["Bea"]
        full = (await c.get("/characters/Cid")).json()
        assert full["data"]["data"]["first_mes"] == "Welcome aboard, {{user}}."
        r = await c.get("/characters", params={"limit": 0})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query.limit"


async def test_avatar_and_small_thumbnail(local: LiveServer) -> None:
    async with local.client() as c:
        await _import_card(c, "Mira")
        big = io.BytesIO()
        Image.new("RGB", (640, 480), "teal").save(big, format="PNG")
        # the same card as a PNG with a large image: its avatar
        card = Card.model_validate(_cards.card("Mira"))
        r = await c.post(
            "/import/raw",
            params={"name": "mira.png", "replace": True},
            content=card_to_png(card, big.getvalue()),
        )
        assert r.status_code == 201, r.text
        line = (await c.get("/characters")).json()["items"][0]
        avatar = await c.get(line["avatar_url"])
        assert avatar.headers["content-type"] == "image/png"
        assert Image.open(io.BytesIO(avatar.content)).size == (640, 480)
        thumb = await c.get(line["thumbnail_url"])
        assert thumb.headers["content-type"] == "image/webp"
        assert max(Image.open(io.BytesIO(thumb.content)).size) == 128
        assert len(thumb.content) < len(avatar.content)


@pytest.mark.parametrize(
    ("path", "body", "edit"),
    [
        ("lorebooks", LOREBOOK, {"name": "Harbour", "entries": {}}),
        ("personas", {"name": "Sam", "avatar": "sam.png"}, {"name": "Samuel", "avatar": "sam.png"}),
        (
            "presets/chat",
            {"name": "Warm", "temperature": 0.9},
            {"name": "Warm", "temperature": 0.5},
        ),
    ],
)
async def test_document_records_round_trip(
    local: LiveServer, path: str, body: dict[str, object], edit: dict[str, object]
) -> None:
    async with local.client() as c:
        r = await c.post(f"/{path}", json=body)
        assert r.status_code == 201, r.text
        rid = r.json()["id"]
        assert (await c.get(f"/{path}/{rid}")).json()["data"] == body
        assert (await c.get(f"/{path}")).json()["total"] == 1
        r = await c.put(f"/{path}/{rid}", json=edit)
        assert r.status_code == 200 and r.json()["id"] == rid and r.json()["data"] == edit
        assert (await c.delete(f"/{path}/{rid}")).status_code == 204
        r = await c.get(f"/{path}/{rid}")
        assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound"


async def test_invalid_document_is_422_naming_the_field_and_writes_nothing(
    local: LiveServer,
) -> None:
    async with local.client() as c:
        r = await c.post("/lorebooks", json={"name": "Bad", "entries": 5})
        assert r.status_code == 422
        assert r.json()["error"] == {
            "type": "FormatError",
            "message": r.json()["error"]["message"],
            "field": "entries",
            "code": "invalid",
            "params": {"field": "entries"},
        }
        assert (await c.get("/lorebooks")).json()["total"] == 0
        r = await c.post(
            "/lorebooks", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 422 and "Traceback" not in r.text


async def test_profile_keys_are_write_only(local: LiveServer) -> None:
    secret = "sk-live-0123456789abcdef-SECRET"
    async with local.client() as c:
        r = await c.post("/profiles", json={"name": "oa", "model": "gpt-x", "keys": [secret]})
        assert r.status_code == 201, r.text
        assert r.json()["keys"][0].startswith("oa (")
        answers = [r, await c.get("/profiles"), await c.get("/profiles/oa")]
        answers.append(await c.get("/openapi.json"))
        assert all(secret not in a.text for a in answers)
        # a bad key spec stores nothing
        r = await c.post("/profiles", json={"name": "bad", "keys": ["env:no-such name"]})
        assert r.status_code == 422 and r.json()["error"]["field"] == "key"
        assert [p["name"] for p in (await c.get("/profiles")).json()] == ["oa"]
        assert (await c.delete("/profiles/oa")).status_code == 204
        assert (await c.get("/profiles/oa")).status_code == 404


async def _chat(c: httpx.AsyncClient) -> str:
    await _import_card(c, "Mira")
    r = await c.post("/chats", json={"character": "Mira"})
    assert r.status_code == 201, r.text
    cid = str(r.json()["id"])
    for n in range(1, 6):
        r = await c.post(
            f"/chats/{cid}/messages",
            json={"name": "User" if n % 2 else "Mira", "text": f"m{n}", "is_user": bool(n % 2)},
        )
        assert r.status_code == 201 and r.json()["index"] == n
    return cid


async def test_messages_page_newest_first(local: LiveServer) -> None:
    async with local.client() as c:
        cid = await _chat(c)
        page = (await c.get(f"/chats/{cid}/messages", params={"limit": 2})).json()
        assert page["total"] == 6
        assert [m["data"]["mes"] for m in page["items"]] == ["m5", "m4"]
        assert [m["incomplete"] for m in page["items"]] == [None, None]
        assert [m["tokens"] for m in page["items"]] == [None, None]  # counted when asked
        counted = (await c.get(f"/chats/{cid}/messages", params={"tokens": True})).json()
        assert all(isinstance(m["tokens"], int) and m["tokens"] > 0 for m in counted["items"])
        page = (await c.get(f"/chats/{cid}/messages", params={"offset": 4, "limit": 5})).json()
        assert [m["index"] for m in page["items"]] == [1, 0]
        assert page["items"][1]["data"]["mes"] == "Welcome aboard, User."
        # a page further back, before a given index (the web UI scrolling up)
        page = (await c.get(f"/chats/{cid}/messages", params={"before": 4, "limit": 2})).json()
        assert [m["data"]["mes"] for m in page["items"]] == ["m3", "m2"]
        page = (await c.get(f"/chats/{cid}/messages", params={"before": 1, "limit": 5})).json()
        assert [m["index"] for m in page["items"]] == [0]
        page = (await c.get(f"/chats/{cid}/messages", params={"before": 0})).json()
        assert page["items"] == [] and page["total"] == 6
        r = await c.get(f"/chats/{cid}/messages", params={"before": -1})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query.before"


async def test_message_edits_swipes_branch(local: LiveServer) -> None:
    async with local.client() as c:
        cid = await _chat(c)
        r = await c.patch(f"/chats/{cid}/messages/2", json={"text": "edited", "reasoning": "why"})
        assert r.status_code == 200 and r.json()["data"]["mes"] == "edited"
        assert r.json()["data"]["extra"]["reasoning"] == "why"
        # the greeting has three swipes: show the second, then drop the third
        r = await c.put(f"/chats/{cid}/messages/0/swipe", json={"swipe": 1})
        assert (
            r.json()["data"]["mes"] == "Mind the gap, User." and r.json()["data"]["swipe_id"] == 1
        )
        assert (await c.delete(f"/chats/{cid}/messages/0/swipes/2")).status_code == 204
        assert len((await c.get(f"/chats/{cid}/messages/0")).json()["data"]["swipes"]) == 2
        assert (await c.put(f"/chats/{cid}/messages/0/swipe", json={"swipe": 7})).status_code == 404
        assert (await c.delete(f"/chats/{cid}/messages/3")).status_code == 204
        texts = [m["data"]["mes"] for m in (await c.get(f"/chats/{cid}/messages")).json()["items"]]
        assert texts == ["m5", "m4", "edited", "m1", "Mind the gap, User."]
        original = (await c.get(f"/chats/{cid}")).json()["name"]
        r = await c.post(f"/chats/{cid}/branch", json={"message_index": 1})
        assert r.status_code == 201 and r.json()["message_count"] == 2
        branch = (await c.get(f"/chats/{r.json()['id']}")).json()
        assert branch["header"]["chat_metadata"]["main_chat"] == original
        r = await c.patch(f"/chats/{cid}", json={"name": "Renamed"})
        assert r.json()["name"] == "Renamed"
        names = {ch["name"] for ch in (await c.get("/chats")).json()["items"]}
        assert "Renamed" in names and len(names) == 2
        assert (await c.get(f"/chats/{cid}/messages/99")).status_code == 404


async def test_an_edit_writes_the_same_rows_whatever_the_chat_length(local: LiveServer) -> None:
    async with local.client() as c:
        short = await _chat(c)
        long_ = (await c.post("/chats", json={"character": "Mira"})).json()["id"]
        for n in range(60):
            await c.post(f"/chats/{long_}/messages", json={"name": "User", "text": f"x{n}"})
        store = local.state.tavern.store
        changes = []
        for cid in (short, long_):
            async with store.trace() as stats:
                r = await c.patch(f"/chats/{cid}/messages/1", json={"text": "once more"})
                assert r.status_code == 200
            changes.append(stats.changes)
        # the message row and the chat's stamp; the search index forgets the old text and
        # takes the new one (its row, and FTS5's writes of the segment that holds it); the
        # owner's stored bytes (one row, a trigger's); the character's latest-chat time (one
        # row, a trigger's: the list's order by last chat)
        assert changes[0] == changes[1] <= 10


async def test_variables(local: LiveServer) -> None:
    async with local.client() as c:
        cid = await _chat(c)
        assert (await c.put("/variables/score", json={"value": 3})).status_code == 200
        assert (await c.get("/variables")).json() == {"score": 3}
        assert (await c.delete("/variables/score")).status_code == 204
        assert (await c.delete("/variables/score")).status_code == 404
        r = await c.put(f"/chats/{cid}/variables/mood", json={"value": {"a": [1]}})
        assert r.json() == {"mood": {"a": [1]}}
        assert (await c.get(f"/chats/{cid}/variables")).json() == {"mood": {"a": [1]}}
        assert (await c.delete(f"/chats/{cid}/variables/mood")).status_code == 204
        assert (await c.get(f"/chats/{cid}/variables")).json() == {}


def test_export_kinds_and_formats_are_the_librarys() -> None:
    assert set(ExportKind.__args__) == {k for k, _ in EXPORT_FORMATS}
    assert set(ExportFormat.__args__) == {f for _, f in EXPORT_FORMATS}


async def test_export_every_format_and_reimport(local: LiveServer) -> None:
    async with local.client() as c:
        cid = await _chat(c)
        await c.post("/lorebooks", json=LOREBOOK)
        await c.post("/presets/chat", json=PRESET)
        wanted = [
            ("character", "Mira", "png", "image/png"),
            ("character", "Mira", "json", "application/json"),
            ("character", "Mira", "charx", "application/zip"),
            ("lorebook", "Harbour", "json", "application/json"),
            ("chat_preset", "Warm", "json", "application/json"),
            ("chat", cid, "jsonl", "application/x-ndjson"),
        ]
        for kind, ref, fmt, media in wanted:
            r = await c.get(f"/export/{kind}/{ref}", params={"format": fmt})
            assert r.status_code == 200, (kind, fmt, r.text)
            assert r.headers["content-type"].startswith(media)
            assert "attachment" in r.headers["content-disposition"]
            if kind != "chat":
                # read back by content (the name says nothing): the same record again
                again = await c.post(
                    "/import", files={"file": ("upload", r.content)}, params={"replace": True}
                )
                assert again.status_code == 201, (kind, fmt, again.text)
                assert again.json()[0]["kind"] == kind and again.json()[0]["name"] == ref
        chat = (await c.get(f"/export/chat/{cid}", params={"format": "jsonl"})).text
        assert len(chat.strip().splitlines()) == 7  # the header and six messages
        r = await c.get("/export/lorebook/Harbour", params={"format": "png"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "format"


async def test_import_recognises_by_content_and_caps_size(tmp_path: Path) -> None:
    capped = settings(tmp_path / "home", upload_max_bytes=4096)
    async with live_server(capped) as server, server.client() as c:
        # a lorebook under a misleading name is still a lorebook
        r = await c.post("/import", files={"file": ("card.png", json.dumps(LOREBOOK).encode())})
        assert r.status_code == 201 and r.json()[0]["kind"] == "lorebook"
        r = await c.post("/import", files={"file": ("x.bin", b"\x00\x01 not a format")})
        assert r.status_code == 422 and r.json()["error"]["type"] == "FormatError"
        big = b"x" * 10_000
        r = await c.post("/import/raw", content=big)
        assert r.status_code == 413 and r.json()["error"]["type"] == "LimitExceeded"

        async def chunks():  # no Content-Length: cut off while it arrives
            for _ in range(10):
                yield b"y" * 1000

        r = await c.post("/import/raw", content=chunks())
        assert r.status_code == 413 and r.json()["error"]["type"] == "LimitExceeded"
        r = await c.post("/import", files={"file": ("big.json", big)})
        assert r.status_code == 413
        assert (await c.get("/lorebooks")).json()["total"] == 1


async def test_a_name_conflict_on_import_names_the_record_not_a_cli_flag(
    local: LiveServer,
) -> None:
    async with local.client() as c:
        await _import_card(c, "Ann")
        changed = _cards.card("Ann")
        changed["data"]["description"] = "someone else"
        other = json.dumps(changed).encode()
        r = await c.post("/import", files={"file": ("ann.json", other, "application/json")})
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["type"] == "NameTaken"
        assert error["message"] == (
            "a character named 'Ann' already exists and differs from ann.json"
        )
        assert "--" not in error["message"]
        r = await c.post(
            "/import",
            params={"replace": True},
            files={"file": ("ann.json", other, "application/json")},
        )
        assert r.status_code == 201 and r.json()[0]["status"] == "replaced"


async def test_hide_a_message_and_delete_from_one_on(local: LiveServer) -> None:
    async with local.client() as c:
        cid = await _chat(c)
        r = await c.put(f"/chats/{cid}/messages/2/hidden", json={"hidden": True})
        assert r.status_code == 200 and r.json()["data"]["is_system"] is True
        assert (await c.get(f"/chats/{cid}/messages/2")).json()["data"]["mes"] == "m2"
        # hidden from the prompt, kept in the chat
        inspect = (await c.get(f"/ui/chats/{cid}/inspect")).json()
        contents = [m["content"] for m in inspect["request"]["messages"]]
        assert "m2" not in contents and "m3" in contents
        r = await c.put(f"/chats/{cid}/messages/2/hidden", json={"hidden": False})
        assert r.json()["data"]["is_system"] is False
        assert (
            await c.put(f"/chats/{cid}/messages/9/hidden", json={"hidden": True})
        ).status_code == 404
        assert (await c.delete(f"/chats/{cid}/messages/from/4")).status_code == 204
        page = (await c.get(f"/chats/{cid}/messages")).json()
        assert page["total"] == 4 and page["items"][0]["data"]["mes"] == "m3"
        assert (await c.delete(f"/chats/{cid}/messages/from/4")).status_code == 404
