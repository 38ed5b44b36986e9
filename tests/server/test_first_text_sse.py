"""The turn's SSE stream shows text as it arrives: the first ``text`` event is the upstream's
first piece (mid-sentence), and a failed attempt's unfinished clause is taken back with a
``withdraw`` event before the continuation writes it again, so the stored reply (and the text
a client shows) holds it once."""

from __future__ import annotations

from typing import Any

from chat._server import Reply
from tavernkit.models.profile import ConnectionProfile, FallbackChain, FallbackEntry

from ._site import Site, site
from ._sse import Event, parse_events

__all__ = ["site"]  # the fixture, used by name


def shown(events: list[Event]) -> str:
    """The text a client shows: ``text`` appended, ``withdraw`` taken off the end."""
    text = ""
    for event in events:
        if event.type == "text":
            text += event.data["text"]
        elif event.type == "withdraw":
            text = text[: len(text) - len(event.data["text"])]
    return text


async def read(site: Site, url: str) -> list[Event]:
    response = await site.client.get(url)
    assert response.status_code == 200, response.text
    return parse_events(response.content)


async def test_the_first_text_event_is_the_first_upstream_piece(site: Site) -> None:
    pieces = ["The ", "lamp ", "burns ", "all ", "night ", "long."]
    site.upstream.script(Reply(text="".join(pieces), chunks=pieces, pace=0.05))
    chat = await site.new_chat()
    events = await read(site, (await site.start(chat)).json()["events"])
    texts = [e.data["text"] for e in events if e.type == "text"]
    assert texts == pieces  # each piece as it came, none held for the sentence's end
    assert shown(events) == "The lamp burns all night long." == await site.stored_reply(chat)


async def _with_fallback(site: Site) -> None:
    """A profile like "scripted" whose fallback is "scripted" with model m2, selected."""
    tk = site.tk
    profile: Any = await tk.store.get("connection_profile", "scripted", owner=tk.owner)
    chained = ConnectionProfile.model_validate(
        {**profile.model_dump(), "name": "chained", "fallback_chain": "backup"}
    )
    await tk.store.put("connection_profile", chained, owner=tk.owner)
    chain = FallbackChain(name="backup", entries=[FallbackEntry(profile="scripted", model="m2")])
    await tk.store.put("fallback_chain", chain, owner=tk.owner)
    settings = await tk.settings()
    settings.selections.profile = "chained"
    await tk.store.put_settings(settings, owner=tk.owner)


async def test_a_cut_attempts_tail_is_withdrawn_and_stored_once(site: Site) -> None:
    await _with_fallback(site)
    site.upstream.script(
        Reply(text="", chunks=["The tide turns. ", "It ri", "ses."], break_after=2),
        Reply(text=" It rises.", chunks=[" It rises."]),
    )
    chat = await site.new_chat()
    events = await read(site, (await site.start(chat)).json()["events"])
    kinds = [e.type for e in events if e.type in ("text", "withdraw")]
    assert kinds[:3] == ["text", "text", "withdraw"]
    withdraw = next(e for e in events if e.type == "withdraw")
    assert withdraw.data == {"text": " It ri"}
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"
    reply = "The tide turns. It rises."
    assert shown(events) == reply == await site.stored_reply(chat)
    # the continuation was asked to follow the last whole clause, byte for byte
    assert site.upstream.requests[1].body["messages"][-1]["content"] == "The tide turns."
