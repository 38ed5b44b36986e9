"""A turn's reasoning on the event stream: with "Parse reasoning" on, a fresh home (no template
imported) splits a reply that starts with ``<think>…</think>`` as it streams, so the SSE
``reasoning`` events come before the ``text`` ones while the reply is still running."""

from __future__ import annotations

import asyncio

from chat._server import HangReply
from tavernkit.models.chat import Message

from ._site import Site, site
from ._sse import Event, events_of, parse_events

__all__ = ["site"]  # the fixture, used by name


async def _events_until_text(site: Site, url: str) -> list[Event]:
    seen: list[Event] = []
    async with site.client.stream("GET", url) as response:
        async for event in events_of(response):
            seen.append(event)
            if event.type == "text":
                return seen
    return seen


async def test_auto_parse_streams_reasoning_then_text_on_a_fresh_home(site: Site) -> None:
    patched = await site.client.patch("/settings", json={"reasoning": {"auto_parse": True}})
    assert patched.status_code == 200, patched.text
    # four pieces, then the upstream stalls: what follows is read while the turn still runs
    chunks = ["<think>", "weigh the ", "tide</think>", "Wait. ", "the ferry sails."]
    site.upstream.script(HangReply(chunks=chunks, hang_after=4))
    chat = await site.new_chat()
    started = (await site.start(chat)).json()
    live = await _events_until_text(site, started["events"])
    assert not site.upstream.release.is_set()  # the rest of the reply is still held upstream
    kinds = [e.type for e in live if e.type in ("reasoning", "text", "done")]
    assert kinds[0] == "reasoning" and kinds[-1] == "text" and "done" not in kinds
    assert "".join(e.data["text"] for e in live if e.type == "reasoning") == "weigh the tide"
    assert "<think>" not in live[-1].data["text"]

    site.upstream.release.set()
    await asyncio.wait_for(site.server.state.turns.wait(started["turn_id"]), 10)
    events = parse_events((await site.client.get(started["events"])).content)
    assert events[-1].data["status"] == "completed"
    assert "".join(e.data["text"] for e in events if e.type == "text") == "Wait. the ferry sails."
    stored = await site.tk.chats.load(chat)
    reply = Message.model_validate(stored.messages[-1].data)
    assert (reply.mes, reply.extra.reasoning) == ("Wait. the ferry sails.", "weigh the tide")
