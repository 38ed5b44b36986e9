"""Concurrent editors over a real uvicorn on loopback: every message carries a revision, an
edit that sends a stale one is refused (409 ``StaleRevision`` with the current revision and
text) and writes nothing, and an edit that sends none is made as before."""

from __future__ import annotations

import asyncio
from typing import Any

from ._site import Site, site

__all__ = ["site"]  # the fixture, used by name


async def _message(site: Site, chat: str, index: int) -> dict[str, Any]:
    r = await site.client.get(f"/chats/{chat}/messages/{index}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_every_message_carries_a_revision_that_changes_with_it(site: Site) -> None:
    chat = await site.new_chat()
    listed = (await site.client.get(f"/chats/{chat}/messages")).json()["items"]
    revision = listed[0]["revision"]
    assert len(revision) == 16 and revision == (await _message(site, chat, 0))["revision"]
    r = await site.client.patch(f"/chats/{chat}/messages/0", json={"text": "Changed."})
    assert r.status_code == 200 and r.json()["revision"] not in ("", revision)
    assert r.json()["revision"] == (await _message(site, chat, 0))["revision"]


async def test_a_stale_edit_is_refused_and_writes_nothing(site: Site) -> None:
    chat = await site.new_chat()
    read = await _message(site, chat, 0)  # two tabs read the same message
    first = await site.client.patch(
        f"/chats/{chat}/messages/0", json={"text": "Tab one.", "revision": read["revision"]}
    )
    assert first.status_code == 200, first.text
    second = await site.client.patch(
        f"/chats/{chat}/messages/0", json={"text": "Tab two.", "revision": read["revision"]}
    )
    assert second.status_code == 409, second.text
    error = second.json()["error"]
    assert error["type"] == "StaleRevision"
    assert error["revision"] == first.json()["revision"]
    assert error["current"] == {"text": "Tab one."}
    assert await site.stored_reply(chat) == "Tab one."
    # with the current revision the edit goes through
    again = await site.client.patch(
        f"/chats/{chat}/messages/0", json={"text": "Tab two.", "revision": error["revision"]}
    )
    assert again.status_code == 200 and await site.stored_reply(chat) == "Tab two."


async def test_two_edits_of_one_revision_at_once_one_wins(site: Site) -> None:
    chat = await site.new_chat()
    revision = (await _message(site, chat, 0))["revision"]
    answers = await asyncio.gather(
        *(
            site.client.patch(
                f"/chats/{chat}/messages/0", json={"text": f"Tab {n}.", "revision": revision}
            )
            for n in range(4)
        )
    )
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409, 409, 409], [a.text for a in answers]
    winner = next(a for a in answers if a.status_code == 200).json()["data"]["mes"]
    assert await site.stored_reply(chat) == winner


async def test_an_edit_without_a_revision_is_made_as_before(site: Site) -> None:
    chat = await site.new_chat()
    await site.client.patch(f"/chats/{chat}/messages/0", json={"text": "Elsewhere."})
    r = await site.client.patch(f"/chats/{chat}/messages/0", json={"text": "No check."})
    assert r.status_code == 200 and await site.stored_reply(chat) == "No check."


async def test_a_revision_of_another_message_is_stale(site: Site) -> None:
    # a tab that read message 1 and edits index 1 after message 0 went: another message
    chat = await site.new_chat()
    for text in ("First.", "Second."):
        r = await site.client.post(f"/chats/{chat}/messages", json={"name": "Ada", "text": text})
        assert r.status_code == 201
    read = await _message(site, chat, 1)
    assert (await site.client.delete(f"/chats/{chat}/messages/0")).status_code == 204
    r = await site.client.patch(
        f"/chats/{chat}/messages/1", json={"text": "Oops.", "revision": read["revision"]}
    )
    assert r.status_code == 409 and r.json()["error"]["current"] == {"text": "Second."}
