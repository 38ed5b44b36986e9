"""The turn routes over a real uvicorn on loopback, with a scripted upstream: streaming,
reconnect-resume byte for byte, a turn that outlives its client, a second client joining,
DELETE, 409, and owner isolation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2 as httpx

from chat._server import HangingServer, HangReply, Reply
from chat.conftest import stock_world

from ._site import Site, site
from ._sse import Event, events_of, parse_events
from .conftest import Users, with_loopback

__all__ = ["site"]  # the fixture, used by name


async def read_all(client: httpx.AsyncClient, url: str, **headers: str) -> bytes:
    response = await client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return response.content


def text_of(events: list[Event]) -> str:
    return "".join(e.data["text"] for e in events if e.type == "text")


async def test_a_turn_streams_its_events_and_stores_the_reply(site: Site) -> None:
    site.upstream.script(Reply(text="Rough seas tonight, Ada.", pace=0.01))
    chat = await site.new_chat()
    started = await site.start(chat)
    assert started.status_code == 202
    body = started.json()
    assert body["chat_id"] == chat and body["kind"] == "send"
    events = parse_events(await read_all(site.client, body["events"]))
    assert events[0].type == "notice" and events[0].data["kind"] == "started"
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"
    assert [e.id for e in events] == [str(i) for i in range(1, len(events) + 1)]
    assert text_of(events) == "Rough seas tonight, Ada." == await site.stored_reply(chat)


async def test_a_reconnect_resumes_after_the_last_event_byte_for_byte(site: Site) -> None:
    words = "one two three four five six seven eight nine ten."
    site.upstream.script(Reply(text=words, chunks=[w + " " for w in words.split()], pace=0.02))
    chat = await site.new_chat()
    url = (await site.start(chat)).json()["events"]
    head: list[Event] = []
    async with site.client.stream("GET", url) as response:
        async for event in events_of(response):
            head.append(event)
            if event.type == "text":
                break  # the phone's tab goes to the background mid-reply
    rest = await read_all(site.client, url, **{"Last-Event-ID": str(head[-1].id)})
    whole = await read_all(site.client, url)  # the turn has ended: its whole log
    assert b"".join(e.raw for e in head) + rest == whole
    assert parse_events(rest)[0].id == str(int(str(head[-1].id)) + 1)
    # ?after= is the same resume for clients that cannot set headers
    assert await read_all(site.client, f"{url}?after={head[-1].id}") == rest


async def test_a_turn_finishes_and_is_stored_after_its_client_drops(site: Site) -> None:
    site.upstream.script(HangReply(text="Wait. the rest comes later", hang_after=1))
    chat = await site.new_chat()
    started = (await site.start(chat)).json()
    await site.watch_until_text(started["events"])
    # no client is watching any more; the reply goes on
    site.upstream.release.set()
    await asyncio.wait_for(site.server.state.turns.wait(started["turn_id"]), 10)
    assert await site.stored_reply(chat) == "Wait. the rest comes later"
    events = parse_events(await read_all(site.client, started["events"]))
    assert events[-1].data["status"] == "completed"


async def test_a_second_client_joins_and_sees_the_same_stream(site: Site) -> None:
    site.upstream.script(HangReply(text="Wait. both of you see this", hang_after=1))
    chat = await site.new_chat()
    url = (await site.start(chat)).json()["events"]
    await asyncio.wait_for(site.upstream.hanging.wait(), 10)
    async with site.server.client() as phone:
        desktop_task = asyncio.create_task(read_all(site.client, url))
        phone_task = asyncio.create_task(read_all(phone, url))
        await asyncio.sleep(0.2)
        assert not desktop_task.done() and not phone_task.done()
        site.upstream.release.set()
        desktop, phone_bytes = await desktop_task, await phone_task
    assert desktop == phone_bytes
    assert text_of(parse_events(desktop)) == "Wait. both of you see this"


async def test_delete_stops_the_turn_keeping_what_was_shown(site: Site) -> None:
    site.upstream.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    chat = await site.new_chat()
    started = (await site.start(chat)).json()
    await site.watch_until_text(started["events"])
    url = f"/chats/{chat}/turns/{started['turn_id']}"
    stopped = await site.client.delete(url)
    assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
    events = parse_events(await read_all(site.client, started["events"]))
    assert events[-1].data["status"] == "aborted"
    assert text_of(events) == await site.stored_reply(chat)
    assert text_of(events).startswith("Wait.")
    assert (await site.client.delete(url)).json() == {"stopped": False}


async def test_a_busy_chat_answers_409_unless_the_turn_interrupts(site: Site) -> None:
    site.upstream.script(HangReply(text="Partly. said", hang_after=1), Reply(text="Fresh."))
    chat = await site.new_chat()
    first = (await site.start(chat)).json()
    await asyncio.wait_for(site.upstream.hanging.wait(), 10)
    busy = await site.start(chat, kind="swipe")
    assert busy.status_code == 409
    assert busy.json()["error"]["type"] == "ChatBusy"
    second = await site.start(chat, kind="regenerate", interrupt=True)
    assert second.status_code == 202
    second_events = parse_events(await read_all(site.client, second.json()["events"]))
    assert second_events[-1].data["status"] == "completed"
    first_events = parse_events(await read_all(site.client, first["events"]))
    assert first_events[-1].data["status"] == "aborted"
    assert await site.stored_reply(chat) == "Fresh."


async def test_bad_turn_requests_are_refused_with_a_named_error(site: Site) -> None:
    chat = await site.new_chat()
    bad_kind = await site.start(chat, kind="dance")
    assert bad_kind.status_code == 422 and bad_kind.json()["error"]["field"] == "body.kind"
    bad_profile = await site.start(chat, overrides={"profile": "nope"})
    assert bad_profile.status_code == 400
    assert bad_profile.json()["error"] == {
        "type": "GenerateTaskError",
        "code": "invalid_input",
        "message": "no connection profile named 'nope'",
        "field": "profile",
        "details": {"field": "profile", "value": "nope"},
        "params": {"field": "profile", "value": "nope"},
    }
    assert (await site.start("no-such-chat")).status_code == 404
    assert (await site.client.get(f"/chats/{chat}/turns/nope/events")).status_code == 404
    site.upstream.script(Reply(text="ok"))
    started = (await site.start(chat)).json()
    bad_id = await site.client.get(started["events"], headers={"Last-Event-ID": "x-1"})
    assert bad_id.status_code == 422
    assert bad_id.json()["error"]["field"] == "Last-Event-ID"
    await asyncio.wait_for(site.server.state.turns.wait(started["turn_id"]), 10)
    assert len((await site.tk.chats.load(chat)).messages) == 3  # only the good turn wrote


@with_loopback
async def test_another_users_turn_is_not_found(tmp_path: Path, users: Users) -> None:
    async with HangingServer([HangReply(text="Private. words", hang_after=1)]) as upstream:
        state = users.server.state
        ann_tk = state.tavern.for_owner(await _owner_of(users, "ann"))
        await stock_world(ann_tk, upstream.base_url)
        chat = (await ann_tk.chats.new_chat("Mira")).id
        started = await users.ann.post(f"/chats/{chat}/turns", json={"text": "Hi"})
        assert started.status_code == 202, started.text
        turn = started.json()["turn_id"]
        base = f"/chats/{chat}/turns"
        assert (await users.bob.post(base, json={"text": "Hi"})).status_code == 404
        assert (await users.bob.get(f"{base}/{turn}/events")).status_code == 404
        assert (await users.bob.delete(f"{base}/{turn}")).status_code == 404
        assert state.turns.running(turn)  # bob's DELETE did not stop it
        task = {"task_messages": [{"role": "user", "content": "hi"}], "chat_id": chat}
        assert (await users.bob.post("/tasks", json=task)).status_code == 404
        upstream.release.set()
        await asyncio.wait_for(state.turns.wait(turn), 10)


async def _owner_of(users: Users, name: str) -> str:
    user, _ = await users.server.state.accounts.store.find_user(name)
    return str(user.owner)


async def test_watching_a_running_turn_reads_no_chat_from_the_store(site: Site) -> None:
    # the turn's start checked the chat for this owner: the watch that follows is answered
    # from the hub (a turn of another process, or a chat named by name, is read as before)
    site.upstream.script(HangReply(text="Held. back", hang_after=1))
    chat = await site.new_chat()
    started = (await site.start(chat)).json()
    await asyncio.wait_for(site.upstream.hanging.wait(), 10)
    for _ in range(500):  # the reply's place is stored while the request goes out: let it be
        if len((await site.tk.store.load_chat(chat, owner=site.tk.owner)).messages) == 3:
            break
        await asyncio.sleep(0.01)
    seen: list[str] = []
    async with (
        site.tk.store.trace(seen.append),
        site.client.stream("GET", started["events"]) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("event: text"):
                break
    assert not any("FROM chats c" in s for s in seen)
    site.upstream.release.set()
    events = parse_events(await read_all(site.client, started["events"]))
    assert events[-1].data["status"] == "completed"


async def test_a_turn_asked_for_its_events_streams_them_from_the_post(site: Site) -> None:
    """``Accept: text/event-stream`` on the POST: the answer is the turn's stream itself, the
    same events (byte for byte) a watch of it reads."""
    site.upstream.script(Reply(text="One request, Ada.", pace=0.01))
    chat = await site.new_chat()
    headers = {"accept": "text/event-stream"}
    body = {"text": "Hello"}
    async with site.client.stream(
        "POST", f"/chats/{chat}/turns", json=body, headers=headers
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        turn = response.headers["x-turn-id"]
        assert response.headers["location"] == f"/chats/{chat}/turns/{turn}/events"
        streamed = b"".join([piece async for piece in response.aiter_bytes()])
    events = parse_events(streamed)
    assert events[0].data == {"kind": "started", "turn": turn, "chat": chat, "verb": "send"}
    assert events[-1].type == "done" and events[-1].data["status"] == "completed"
    assert text_of(events) == "One request, Ada." == await site.stored_reply(chat)
    assert parse_events(await read_all(site.client, response.headers["location"])) == events
    # without the header (or refusing the stream), the 202 as before
    site.upstream.script(Reply(text="Two."))
    refused = await site.client.post(
        f"/chats/{chat}/turns", json=body, headers={"accept": "text/event-stream;q=0, */*"}
    )
    assert refused.status_code == 202 and refused.json()["chat_id"] == chat
    await read_all(site.client, refused.json()["events"])


async def test_a_streamed_post_that_drops_leaves_the_turn_running_and_resumable(
    site: Site,
) -> None:
    site.upstream.script(HangReply(text="Wait. then the rest", hang_after=1))
    chat = await site.new_chat()
    head: list[Event] = []
    async with site.client.stream(
        "POST", f"/chats/{chat}/turns", json={"text": "Hi"}, headers={"accept": "text/event-stream"}
    ) as response:
        location, turn = response.headers["location"], response.headers["x-turn-id"]
        async for event in events_of(response):
            head.append(event)
            if event.type == "text":
                break  # the phone's tab goes to the background
    site.upstream.release.set()
    await asyncio.wait_for(site.server.state.turns.wait(turn), 10)
    assert await site.stored_reply(chat) == "Wait. then the rest"
    rest = await read_all(site.client, location, **{"Last-Event-ID": str(head[-1].id)})
    whole = await read_all(site.client, location)
    assert b"".join(e.raw for e in head) + rest == whole
    assert parse_events(whole)[-1].data["status"] == "completed"


async def test_a_streamed_post_on_a_busy_chat_is_a_409_body(site: Site) -> None:
    site.upstream.script(HangReply(text="Wait. busy", hang_after=1))
    chat = await site.new_chat()
    first = (await site.start(chat)).json()
    await asyncio.wait_for(site.upstream.hanging.wait(), 10)
    busy = await site.client.post(
        f"/chats/{chat}/turns", json={"text": "Again"}, headers={"accept": "text/event-stream"}
    )
    assert busy.status_code == 409
    assert busy.headers["content-type"].startswith("application/json")
    site.upstream.release.set()
    await read_all(site.client, first["events"])
