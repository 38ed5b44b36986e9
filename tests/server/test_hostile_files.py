"""Issue 34, finding 4, against a real server: hostile files are refused with a typed 4xx and
the numbers, nothing of them is stored, the server's memory stays near the caps; an imported
avatar ends up a bounded image; a stored bomb's thumbnail is a 422, never a 500; and with
accounts on every user's storage is held to the admin's quota."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2 as httpx
import pytest
from PIL import Image

from _hostile import (
    MiB,
    card_chunk,
    noise,
    pixel_bomb_png_card,
    png,
    zeros_charx,
    ztxt_bomb_png,
)
from tavernkit.server.avatars import AVATAR_MAX_SIDE

from ._live import LiveServer, live_server
from .conftest import PASSWORD, settings, token_client


async def _characters(client: httpx.AsyncClient) -> list[str]:
    return [line["name"] for line in (await client.get("/characters")).json()["items"]]


async def _import(client: httpx.AsyncClient, name: str, data: bytes) -> httpx.Response:
    return await client.post("/import", files={"file": (name, data, "application/octet-stream")})


async def test_the_issues_charx_bomb_is_a_413_and_nothing_is_stored(local: LiveServer) -> None:
    bomb = zeros_charx(190 * MiB)
    async with local.client() as client:
        tracemalloc.start()
        try:
            answer = await _import(client, "bomb.charx", bomb)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert answer.status_code == 413, answer.text
        error = answer.json()["error"]
        assert error["type"] == "LimitExceeded"
        assert "199229644 bytes, over the limit of 104857600" in error["message"]
        assert await _characters(client) == []
    # client, server and reader together held a few MiB, never the 190 MiB of zeros
    assert peak < 16 * MiB
    assert await local.state.tavern.store.storage_used(owner=local.state.tavern.owner) == 0


async def test_a_ztxt_bomb_is_a_413(local: LiveServer) -> None:
    async with local.client() as client:
        answer = await _import(client, "bomb.png", ztxt_bomb_png(256 * MiB))
        assert answer.status_code == 413, answer.text
        assert "100 times its" in answer.json()["error"]["message"]
        assert await _characters(client) == []


async def test_a_pixel_bomb_avatar_is_refused_with_its_size(local: LiveServer) -> None:
    async with local.client() as client:
        answer = await _import(client, "bomb.png", pixel_bomb_png_card())
        assert answer.status_code == 413, answer.text
        error = answer.json()["error"]
        assert error["type"] == "LimitExceeded" and error["field"] == "avatar"
        assert "50000x50000 pixels, over the limit of 40000000" in error["message"]
        assert await _characters(client) == []


async def test_a_huge_avatar_is_stored_scaled_down(local: LiveServer) -> None:
    big = png(3000, 2000, None, card_chunk())
    async with local.client() as client:
        answer = await _import(client, "big.png", big)
        assert answer.status_code == 201, answer.text
        ref = answer.json()[0]["id"]
        stored = (await client.get(f"/characters/{ref}/avatar")).content
        with Image.open(io.BytesIO(stored)) as img:
            assert max(img.size) == AVATAR_MAX_SIDE and img.size == (1536, 1024)
        # still a card: its PNG export carries it
        exported = await client.get(f"/export/character/{ref}?format=png")
        assert exported.status_code == 200
        assert (await _import(client, "again.png", exported.content)).json()[0]["status"] in (
            "unchanged",
            "imported",
        )
        # a small avatar is kept byte for byte (a PNG card's chunks and all)
        small = png(400, 600, None, card_chunk({"spec": "chara_card_v2", "data": {"name": "S"}}))
        kept = (await _import(client, "small.png", small)).json()[0]["id"]
        assert (await client.get(f"/characters/{kept}/avatar")).content == small


async def test_the_thumbnail_of_a_stored_bomb_is_a_422(local: LiveServer) -> None:
    tk = local.state.tavern
    card = {"spec": "chara_card_v2", "data": {"name": "Old"}}
    ref = await tk.store.put(
        "character", card, owner=tk.owner, name="Old", blobs={"avatar": pixel_bomb_png_card()}
    )
    async with local.client() as client:
        answer = await client.get(f"/characters/{ref.id}/thumbnail")
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["type"] == "FormatError" and error["field"] == "avatar"
        assert "50000x50000 pixels" in error["message"]


QUOTA = 256 * 1024


@pytest.fixture
async def quota(
    tmp_path: Path,
) -> AsyncIterator[tuple[LiveServer, httpx.AsyncClient, httpx.AsyncClient]]:
    conf = settings(tmp_path / "home", accounts=True, user_quota_bytes=QUOTA)
    async with live_server(conf) as server:
        await server.state.accounts.create_user("admin", PASSWORD, is_admin=True)
        await server.state.accounts.create_user("ann", PASSWORD)
        admin, ann = await token_client(server, "admin"), await token_client(server, "ann")
        try:
            yield server, admin, ann
        finally:
            await admin.aclose()
            await ann.aclose()


def _card_png(name: str, side: int) -> bytes:
    chunk = card_chunk({"spec": "chara_card_v2", "data": {"name": name}})
    return png(side, side, noise(side, side), chunk)


async def test_the_storage_quota_is_a_413_with_the_numbers(
    quota: tuple[LiveServer, httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    server, admin, ann = quota
    first = await _import(ann, "a.png", _card_png("A", 220))  # about 145 KB stored
    assert first.status_code == 201, first.text
    owner = (await server.state.accounts.store.find_user("ann"))[0].owner
    used = await server.state.tavern.store.storage_used(owner=owner)
    assert 100_000 < used < QUOTA
    # a second one would pass the quota: refused before anything is stored
    second = await _import(ann, "b.png", _card_png("B", 220))
    assert second.status_code == 413, second.text
    error = second.json()["error"]
    assert error["type"] == "LimitExceeded" and error["field"] == "storage_quota"
    assert f"{used} bytes stored of the {QUOTA} allowed" in error["message"]
    assert await _characters(ann) == ["A"]
    assert await server.state.tavern.store.storage_used(owner=owner) == used
    # a body that alone would pass it is refused on its Content-Length, unread
    big = await ann.post(
        "/characters",
        content=json.dumps({"name": "x" * QUOTA}).encode(),
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413 and "storage quota" in big.json()["error"]["message"]
    # admins are not held to it
    for name in ("C", "D", "E"):
        assert (await _import(admin, f"{name}.png", _card_png(name, 200))).status_code == 201
    # deleting gives the room back
    ref = first.json()[0]["id"]
    assert (await ann.delete(f"/characters/{ref}")).status_code == 204
    assert await server.state.tavern.store.storage_used(owner=owner) < 1000
    assert (await _import(ann, "b.png", _card_png("B", 220))).status_code == 201


async def test_an_import_that_unpacks_past_the_quota_is_refused_whole(
    quota: tuple[LiveServer, httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    server, _, ann = quota
    # a 2 KB upload (under the quota) with a member that unpacks past it (900 KiB: under
    # the size where the ratio is checked)
    packed = zeros_charx(900 * 1024, member="module.risum")
    assert len(packed) < 4_000
    answer = await _import(ann, "big.charx", packed)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["field"] == "storage_quota"
    assert await _characters(ann) == []
    owner = (await server.state.accounts.store.find_user("ann"))[0].owner
    assert await server.state.tavern.store.storage_used(owner=owner) == 0


async def test_a_pixel_bomb_persona_avatar_is_refused(local: LiveServer) -> None:
    async with local.client() as client:
        made = await client.post("/personas", json={"name": "P", "description": "d"})
        url = f"/personas/{made.json()['id']}/avatar"
        bomb = png(50_000, 50_000, b"\x78\x9c\x03\x00\x00\x00\x00\x01")
        answer = await client.put(url, files={"file": ("p.png", bomb, "image/png")})
        assert answer.status_code == 413, answer.text
        assert "50000x50000 pixels" in answer.json()["error"]["message"]
        assert (await client.get(url)).status_code == 404
