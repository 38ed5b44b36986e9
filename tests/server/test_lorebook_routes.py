"""A lorebook's own routes over a real uvicorn on loopback: its entries one at a time (the
server picks a new entry's uid; a patch keeps the entry's other keys in their place; a bad
value is a 422 naming the field; edits sent together all land), rename and duplicate, where it
is bound (global, chat, character, persona: what a turn reads) and binding it (a chat-bound
entry reaches the next turn's request), a rename that the bindings follow and a delete that
clears them; another user's chat cannot be bound."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from pathlib import Path
from typing import Any

import pytest

from chat._server import Reply
from tavernkit.errors import ServerConfigError
from tavernkit.models.lorebook import entry_template
from tavernkit.server.settings import LOREBOOK_CEILING

from ._cards import LOREBOOK, card_file
from ._live import live_server
from ._site import Site, site
from .conftest import Users, settings

__all__ = ["site"]  # the fixture, used by name

#: the site's preset has no world-info slot: an entry at depth 0 goes into the chat itself
FERRY: dict[str, Any] = {
    "key": ["ferry"],
    "content": "The ferry leaves at dusk.",
    "comment": "Ferry",
    "position": 4,
    "depth": 0,
    "role": 0,
}


async def _book(site: Site, name: str = "Coast") -> str:
    r = await site.client.post("/lorebooks", json={"name": name, "entries": {}})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_entries_are_added_changed_and_deleted_one_at_a_time(site: Site) -> None:
    c = site.client
    book = await _book(site)
    r = await c.post(f"/lorebooks/{book}/entries", json={**FERRY, "uid": 99})
    assert r.status_code == 201, r.text
    first = r.json()
    assert first["uid"] == "0" and first["data"]["uid"] == 0  # the server's uid, not 99
    assert first["data"]["displayIndex"] == 0 and first["data"]["key"] == ["ferry"]
    assert first["data"]["probability"] == 100  # SillyTavern's new-entry template
    r = await c.post(f"/lorebooks/{book}/entries", json={"key": ["gull"], "content": "Gulls."})
    assert r.json()["uid"] == "1"

    keys_before = list(first["data"])
    r = await c.patch(f"/lorebooks/{book}/entries/0", json={"depth": 2, "extra": "kept"})
    assert r.status_code == 200, r.text
    patched = r.json()["data"]
    assert patched["depth"] == 2 and patched["content"] == "The ferry leaves at dusk."
    assert list(patched) == [*keys_before, "extra"]  # keys stay in place
    assert (await c.get(f"/lorebooks/{book}/entries/0")).json()["data"] == patched

    r = await c.patch(f"/lorebooks/{book}/entries/0", json={"depth": "deep"})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("depth"), r.text
    r = await c.patch(f"/lorebooks/{book}/entries/0", json={"uid": 5})
    assert r.status_code == 422 and r.json()["error"]["field"] == "uid"
    r = await c.put(f"/lorebooks/{book}/entries/1", json={"key": ["tern"], "content": "Terns."})
    assert r.status_code == 200 and r.json()["data"] == {
        "uid": 1,
        "key": ["tern"],
        "content": "Terns.",
    }
    assert (await c.delete(f"/lorebooks/{book}/entries/1")).status_code == 204
    for method in ("GET", "PATCH", "DELETE"):
        r = await c.request(method, f"/lorebooks/{book}/entries/1", json={})
        assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound", method
    stored = (await c.get(f"/lorebooks/{book}")).json()["data"]
    assert list(stored["entries"]) == ["0"] and stored["entries"]["0"]["depth"] == 2
    # a freed uid is the next one given, as SillyTavern gives it
    r = await c.post(f"/lorebooks/{book}/entries", json={})
    assert r.json()["uid"] == "1"


async def test_the_entries_lines_are_an_editors_list_without_content(site: Site) -> None:
    c = site.client
    book = await _book(site)
    await c.post(f"/lorebooks/{book}/entries", json=FERRY)
    await c.post(f"/lorebooks/{book}/entries", json={"key": ["gull"], "content": "Gulls at DUSK."})
    await c.patch(f"/lorebooks/{book}/entries/0", json={"disable": True})
    r = await c.get(f"/lorebooks/{book}/entries")
    assert r.status_code == 200, r.text
    found = r.json()
    assert found["book"]["id"] == book and found["book"]["name"] == "Coast"
    assert found["fields"][:3] == ["comment", "key", "keysecondary"]
    assert found["fields"][-1] == "uid" and "content" not in found["fields"]
    lines = [dict(zip(found["fields"], line, strict=True)) for line in found["entries"]]
    assert [(e["uid"], e["comment"], e["key"], e["disable"]) for e in lines] == [
        ("0", "Ferry", ["ferry"], True),
        ("1", "", ["gull"], False),
    ]
    assert "dusk" not in r.text.lower()  # no content
    r = await c.get(f"/lorebooks/{book}/entries", params={"content": "Dusk"})
    assert [line[-1] for line in r.json()["entries"]] == ["0", "1"]
    r = await c.get(f"/lorebooks/{book}/entries", params={"content": "gulls"})
    assert [line[-1] for line in r.json()["entries"]] == ["1"]
    r = await c.get(f"/lorebooks/{book}/entries", params={"content": ""})
    assert r.status_code == 422, r.text
    r = await c.get("/lorebooks/Nowhere/entries")
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound", r.text


async def test_edits_sent_together_all_land(site: Site) -> None:
    c = site.client
    book = await _book(site)
    made = await asyncio.gather(
        *(c.post(f"/lorebooks/{book}/entries", json={"comment": f"e{i}"}) for i in range(8))
    )
    assert sorted(int(r.json()["uid"]) for r in made) == list(range(8))
    done = await asyncio.gather(
        *(c.patch(f"/lorebooks/{book}/entries/{i}", json={"order": i + 500}) for i in range(8))
    )
    assert all(r.status_code == 200 for r in done)
    entries = (await c.get(f"/lorebooks/{book}")).json()["data"]["entries"]
    assert {e["comment"]: e["order"] for e in entries.values()} == {
        f"e{i}": i + 500 for i in range(8)
    }


async def test_rename_and_duplicate(site: Site) -> None:
    c = site.client
    book = await _book(site)
    await _book(site, "Taken")
    r = await c.post(f"/lorebooks/{book}/rename", json={"name": "Taken"})
    assert r.status_code == 409 and r.json()["error"]["type"] == "NameTaken"
    r = await c.post(f"/lorebooks/{book}/rename", json={"name": "  "})
    assert r.status_code == 422
    r = await c.post(f"/lorebooks/{book}/rename", json={"name": "Shore"})
    assert r.status_code == 200 and r.json()["name"] == "Shore" and r.json()["id"] == book
    assert (await c.get(f"/lorebooks/{book}")).json()["data"]["name"] == "Shore"
    await c.post(f"/lorebooks/{book}/entries", json=FERRY)
    first = await c.post(f"/lorebooks/{book}/duplicate", json={})
    second = await c.post("/lorebooks/Shore/duplicate", json={})
    assert first.status_code == 201 and first.json()["name"] == "Shore (copy)"
    assert second.json()["name"] == "Shore (copy) 2"
    copy = (await c.get(f"/lorebooks/{first.json()['id']}")).json()["data"]
    assert copy["entries"]["0"]["content"] == FERRY["content"] and copy["name"] == "Shore (copy)"
    r = await c.post(f"/lorebooks/{book}/duplicate", json={"name": "Taken"})
    assert r.status_code == 409


async def test_bindings_follow_a_rename_and_go_with_a_delete(site: Site) -> None:
    c = site.client
    book = await _book(site)
    await c.post(f"/lorebooks/{book}/entries", json=FERRY)
    chat = await site.new_chat()
    r = await c.post("/personas", json={"name": "Sailor", "description": "A sailor."})
    assert r.status_code == 201, r.text
    persona = r.json()["id"]
    binds = [
        {"scope": "global"},
        {"scope": "chat", "target": chat},
        {"scope": "character", "target": "Mira"},
        {"scope": "persona", "target": "Sailor"},
    ]
    for body in binds:
        r = await c.post(f"/lorebooks/{book}/bindings", json=body)
        assert r.status_code == 200, (body, r.text)
    used = r.json()["used_by"]
    assert [(u["scope"], u["name"]) for u in used] == [
        ("global", ""),
        ("character", "Mira"),
        ("chat", used[2]["name"]),
        ("persona", "Sailor"),
    ]
    assert used[2]["id"] == chat and used[2]["character_name"] == "Mira"
    assert used[1]["via"] == "link"
    r = await c.post(f"/lorebooks/{book}/bindings", json={"scope": "chat"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "target"
    r = await c.post(f"/lorebooks/{book}/bindings", json={"scope": "chat", "target": "nope"})
    assert r.status_code == 404

    await c.post(f"/lorebooks/{book}/rename", json={"name": "Shore"})
    assert (await site.tk.settings()).world_info.global_books == ["Shore"]
    header = (await c.get(f"/chats/{chat}")).json()["header"]
    assert header["chat_metadata"]["world_info"] == "Shore"
    assert (await c.get(f"/personas/{persona}")).json()["data"]["lorebook"] == "Shore"
    r = await c.get(f"/lorebooks/{book}/bindings")
    assert [u["scope"] for u in r.json()["used_by"]] == ["global", "character", "chat", "persona"]
    everything = (await c.get("/lorebook-bindings")).json()
    assert [u["scope"] for u in everything[book]] == ["global", "character", "chat", "persona"]

    # unbinding everywhere but the chat: the chat's entry still reaches the next turn
    for scope, target in (("global", None), ("character", "Mira"), ("persona", persona)):
        query = {"target": target} if target else {}
        r = await c.delete(f"/lorebooks/{book}/bindings/{scope}", params=query)
        assert r.status_code == 200, r.text
    assert [u["scope"] for u in r.json()["used_by"]] == ["chat"]
    site.upstream.script(Reply(text="Aye."))
    out = await site.tk.chats.send(chat, "When does the ferry leave?")
    assert out.status == "completed", out.error
    assert "The ferry leaves at dusk." in json.dumps(site.upstream.requests[-1].body)

    await c.post(f"/lorebooks/{book}/bindings", json={"scope": "global"})
    assert (await c.delete(f"/lorebooks/{book}")).status_code == 204
    assert (await site.tk.settings()).world_info.global_books == []
    header = (await c.get(f"/chats/{chat}")).json()["header"]
    assert header["chat_metadata"].get("world_info") is None
    assert book not in (await c.get("/lorebook-bindings")).json()


async def test_a_card_that_names_a_book_is_listed_and_unbound(site: Site) -> None:
    c = site.client
    book = await _book(site, "Deck")
    card = (await c.get("/characters/Mira")).json()["data"]
    card["data"].setdefault("extensions", {})["world"] = "Deck"
    assert (await c.put("/characters/Mira", json=card)).status_code == 200
    used = (await c.get(f"/lorebooks/{book}/bindings")).json()["used_by"]
    assert [(u["scope"], u["name"], u["via"]) for u in used] == [("character", "Mira", "card")]
    await c.post(f"/lorebooks/{book}/rename", json={"name": "Foredeck"})
    card = (await c.get("/characters/Mira")).json()["data"]
    assert card["data"]["extensions"]["world"] == "Foredeck"
    r = await c.delete(f"/lorebooks/{book}/bindings/character", params={"target": "Mira"})
    assert r.json()["used_by"] == []
    assert (await c.get("/characters/Mira")).json()["data"]["data"]["extensions"]["world"] == ""


async def test_another_users_chat_or_book_cannot_be_bound(users: Users) -> None:
    ann, bob = users.ann, users.bob
    await ann.post("/import", files={"file": card_file("Mira")})
    chat = (await ann.post("/chats", json={"character": "Mira"})).json()["id"]
    assert (await ann.post("/lorebooks", json=LOREBOOK)).status_code == 201
    r = await bob.post("/lorebooks", json={**LOREBOOK, "name": "Bob's"})
    bobs = r.json()["id"]
    r = await bob.post(f"/lorebooks/{bobs}/bindings", json={"scope": "chat", "target": chat})
    assert r.status_code == 404
    r = await bob.post(f"/lorebooks/{bobs}/bindings", json={"scope": "character", "target": "Mira"})
    assert r.status_code == 404
    assert (await bob.get("/lorebook-bindings")).json() == {}
    header = (await ann.get(f"/chats/{chat}")).json()["header"]
    assert header["chat_metadata"].get("world_info") is None


async def test_an_entry_of_a_big_book_is_written_while_other_requests_are_served(
    site: Site,
) -> None:
    """A 20,000-entry book (SillyTavern's entry fields, a paragraph each: ~26 MB): one entry's
    PATCH, PUT, POST and DELETE touch only that entry, and the server's event loop keeps
    running all the while (the old route parsed, validated and re-encoded the whole book on
    the event loop for each: it stood still for seconds)."""
    entries = {
        str(i): {
            "uid": i,
            **entry_template(),
            "key": [f"key{i}"],
            "comment": f"Entry {i}",
            "content": f"Lore {i}. " + "The harbour keeps its own counsel. " * 10,
            "displayIndex": i,
        }
        for i in range(20_000)
    }
    book = (await site.tk.store.put("lorebook", {"entries": entries}, name="Atlas")).id
    c = site.client
    gaps: list[float] = []

    async def tick() -> None:  # the server's event loop is this test's: how long it stalls
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    edits = (
        ("PATCH", "entries/77", {"order": 5}),
        ("PUT", "entries/78", {"key": ["x"]}),
        ("POST", "entries", {"key": ["new"]}),
        ("DELETE", "entries/79", None),
    )
    # the routes' first calls build their FastAPI models (half a second): not the book's cost
    small = await _book(site, "Small")
    for method, path, body in edits:
        await c.request(method, f"/lorebooks/{small}/{path}", json=body)
    gc.collect()  # and the book made above is garbage to sweep
    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    codes = [
        (await c.request(method, f"/lorebooks/{book}/{path}", json=body)).status_code
        for method, path, body in edits
    ]
    took = time.perf_counter() - started
    ticker.cancel()
    assert codes == [200, 200, 201, 204]
    longest = max(gaps)
    print(f"\nfour entry writes: {took * 1000:.0f} ms; the loop stalled {longest * 1000:.0f} ms")
    assert longest < max(0.1, took / 8), (longest, took)

    stored = (await site.tk.store.get_record("lorebook", book)).data["entries"]
    assert stored["77"] == {**entries["77"], "order": 5}
    assert stored["78"] == {"uid": 78, "key": ["x"]}
    assert stored["20000"]["key"] == ["new"] and "79" not in stored
    assert stored["80"] == entries["80"] and len(stored) == 20_000
    assert list(stored)[-1] == "20000"  # a new entry goes last, as SillyTavern adds it


async def test_the_lorebook_size_cap_is_a_setting(tmp_path: Path) -> None:
    """``lorebook_max_bytes`` (``--lorebook-max-bytes``) caps an imported book; the default
    admits a book over the card's 20 MiB (the old fixed cap)."""
    book = json.dumps({"entries": {"0": {"uid": 0, "key": ["a"], "content": "x" * 3000}}})
    small = settings(tmp_path / "small", lorebook_max_bytes=2000)
    async with live_server(small) as server, server.client() as c:
        r = await c.post("/import", files={"file": ("Coast.json", book.encode())})
        assert r.status_code == 413, r.text
        assert r.json()["error"]["type"] == "LimitExceeded"
        assert "over the limit of 2000" in r.json()["error"]["message"]
    assert settings(tmp_path / "default").lorebook_max_bytes > 20 * 1024 * 1024
    with pytest.raises(ServerConfigError, match="at most"):
        settings(tmp_path / "x", lorebook_max_bytes=LOREBOOK_CEILING + 1).check()
    async with live_server(settings(tmp_path / "default")) as server, server.client() as c:
        r = await c.post("/import", files={"file": ("Coast.json", book.encode())})
        assert r.status_code == 201, r.text
