"""The OpenAI-compatible facade with the official ``openai`` client as a real client, over a
real uvicorn on loopback and a scripted upstream: models, characters (the card, persona and
macros applied server-side) and profiles (a proxy with fallbacks), streaming and not, and
errors with the status codes and bodies the client expects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from chat._server import HangingServer, HangReply, Reply
from chat.conftest import stock_world
from tavernkit.facade import Tavern
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile, FallbackChain, FallbackEntry

from ._live import LiveServer, live_server
from ._sse import parse_events
from .conftest import Users, settings, with_loopback

HELLO = [{"role": "user", "content": "Hello {{char}}"}]


@dataclass
class Facade:
    server: LiveServer
    upstream: HangingServer
    tk: Tavern
    client: openai.AsyncOpenAI

    def sent(self, n: int = -1) -> dict[str, Any]:
        return self.upstream.requests[n].body


@pytest.fixture
async def facade(tmp_path: Path) -> AsyncIterator[Facade]:
    async with HangingServer() as upstream, live_server(settings(tmp_path / "home")) as server:
        tk = server.state.tavern
        await stock_world(tk, upstream.base_url)
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        try:
            yield Facade(server, upstream, tk, client)
        finally:
            await client.close()


async def test_models_lists_characters_and_profiles(facade: Facade) -> None:
    models = [m.id async for m in facade.client.models.list()]
    # the embedded model last: the connection a turn uses when no profile is selected
    assert models == ["character/Mira", "profile/scripted", "profile/embedded"]
    one = await facade.client.models.retrieve("character/Mira")
    assert one.id == "character/Mira" and one.owned_by == "character"
    embedded = await facade.client.models.retrieve("profile/embedded")
    assert embedded.owned_by == "profile"


async def test_a_stored_profile_named_embedded_is_the_one_listed(facade: Facade) -> None:
    mine = ConnectionProfile(
        name="embedded", source="openai", base_url=facade.upstream.base_url + "/v1", model="m9"
    )
    await facade.tk.store.put("connection_profile", mine, owner=facade.tk.owner)
    models = [m.id async for m in facade.client.models.list()]
    assert models == ["character/Mira", "profile/embedded", "profile/scripted"]
    facade.upstream.script(Reply(text="Mine."))
    reply = await facade.client.chat.completions.create(model="profile/embedded", messages=HELLO)
    assert reply.choices[0].message.content == "Mine." and facade.sent()["model"] == "m9"


async def test_a_characters_reply_is_capped_by_the_clients_max_tokens(facade: Facade) -> None:
    facade.upstream.script(Reply(text="Short."), Reply(text="Also short."))
    await facade.client.chat.completions.create(
        model="character/Mira", messages=HELLO, max_tokens=7
    )
    assert facade.sent()["max_tokens"] == 7
    await facade.client.chat.completions.create(
        model="character/Mira", messages=HELLO, max_completion_tokens=5
    )
    assert facade.sent()["max_tokens"] == 5


async def test_a_character_answers_with_its_card_persona_and_macros_server_side(
    facade: Facade,
) -> None:
    facade.upstream.script(Reply(text="Welcome aboard, Ada.", usage=(30, 4)))
    reply = await facade.client.chat.completions.create(model="character/Mira", messages=HELLO)
    assert reply.choices[0].message.content == "Welcome aboard, Ada."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "character/Mira"
    assert reply.usage is not None and reply.usage.prompt_tokens == 30
    assert reply.usage.completion_tokens == 4 and reply.usage.total_tokens == 34
    prompt = json.dumps(facade.sent()["messages"])
    assert "Mira keeps the ferry. Ada is a passenger." in prompt  # card, macros, persona
    assert "Hello Mira" in prompt  # the client's own message, macros evaluated
    assert len(await facade.tk.store.list_chats(owner=facade.tk.owner)) == 0  # nothing stored


async def test_a_character_streams_chunks_then_usage_then_done(facade: Facade) -> None:
    facade.upstream.script(Reply(text="Rough seas tonight, Ada.", usage=(30, 6)))
    stream = await facade.client.chat.completions.create(
        model="character/Mira",
        messages=HELLO,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Rough seas tonight, Ada."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 36
    assert len({c.id for c in chunks}) == 1


async def test_every_raw_chunk_has_a_choices_array_and_the_stream_ends_with_done(
    facade: Facade,
) -> None:
    # SillyTavern reads ``choices`` of every chunk; without include_usage there is no
    # choices-less usage chunk at all, the usage rides on the finishing chunk
    facade.upstream.script(Reply(text="Tickets, please."))
    async with facade.server.client() as raw:
        response = await raw.post(
            "/v1/chat/completions",
            json={"model": "character/Mira", "messages": HELLO, "stream": True},
        )
    events = parse_events(response.content)
    assert events[-1].data == "[DONE]"
    chunks = [e.data for e in events[:-1]]
    assert all(isinstance(c["choices"], list) and c["choices"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["total_tokens"] == 17


async def test_a_profile_is_a_proxy_with_the_clients_samplers_and_its_fallbacks(
    facade: Facade,
) -> None:
    store, owner = facade.tk.store, facade.tk.owner
    stored = await store.get_record("connection_profile", "scripted", owner=owner)
    profile = ConnectionProfile.model_validate(stored.data).model_copy(
        update={"fallback_chain": "backup"}
    )
    await store.put("connection_profile", profile, owner=owner, id=stored.info.id)
    backup = FallbackChain(name="backup", entries=[FallbackEntry(profile="scripted", model="m2")])
    await store.put("fallback_chain", backup, owner=owner)
    facade.upstream.script(
        Reply(status=400, error={"error": {"message": "model m1 is gone"}}),
        Reply(text="From the backup."),
    )
    messages = [{"role": "system", "content": "Be brief {{char}}"}, *HELLO]
    reply = await facade.client.chat.completions.create(
        model="profile/scripted", messages=messages, temperature=0.25, max_tokens=9, stop=["\n"]
    )
    assert reply.choices[0].message.content == "From the backup."
    assert [r.body["model"] for r in facade.upstream.requests] == ["m1", "m2"]
    sent = facade.sent()
    assert sent["messages"] == messages  # as given: no card, no world info, no macros
    assert sent["temperature"] == 0.25 and sent["max_tokens"] == 9 and sent["stop"] == ["\n"]


async def test_a_proxied_request_carries_no_preset_samplers(facade: Facade) -> None:
    preset = ChatCompletionPreset.model_validate(
        {"name": "warm", "temperature": 1.7, "openai_max_tokens": 333, "top_p": 0.5}
    )
    await facade.tk.store.put("chat_preset", preset, owner=facade.tk.owner)
    chosen = await facade.tk.settings()
    chosen.selections.chat_preset = "warm"
    await facade.tk.store.put_settings(chosen, owner=facade.tk.owner)
    facade.upstream.script(Reply(text="Plain."), Reply(text="Plain again."))
    await facade.client.chat.completions.create(model="profile/scripted", messages=HELLO)
    stream = await facade.client.chat.completions.create(
        model="profile/scripted", messages=HELLO, stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream]) == "Plain again."
    for request in facade.upstream.requests:
        assert not {"temperature", "max_tokens", "top_p"} & set(request.body)
    # a character, by contrast, runs with the preset
    facade.upstream.script(Reply(text="Warmly."))
    await facade.client.chat.completions.create(model="character/Mira", messages=HELLO)
    assert facade.sent()["temperature"] == 1.7


async def test_a_profile_streams_as_a_proxy(facade: Facade) -> None:
    facade.upstream.script(Reply(text="Straight through.", reasoning="think"))
    stream = await facade.client.chat.completions.create(
        model="profile/scripted", messages=HELLO, stream=True, max_tokens=5
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Straight through."
    reasoning = [getattr(c.choices[0].delta, "reasoning_content", None) for c in chunks]
    assert "".join(r for r in reasoning if r) == "think"
    assert facade.sent()["max_tokens"] == 5 and facade.sent()["stream"] is True


async def test_errors_have_openais_shape_and_status_codes(facade: Facade) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        await facade.client.chat.completions.create(model="character/Nobody", messages=HELLO)
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    with pytest.raises(openai.BadRequestError) as bad:
        await facade.client.chat.completions.create(model="character/Mira", messages=[])
    assert bad.value.param == "messages" and bad.value.code == "invalid_value"
    facade.upstream.script(
        Reply(status=429, error={"error": {"message": "slow down"}}, headers={"retry-after": "0"})
    )
    with pytest.raises(openai.RateLimitError) as limited:
        await facade.client.chat.completions.create(model="profile/scripted", messages=HELLO)
    assert limited.value.code == "rate_limit"
    assert isinstance(limited.value.body, dict) and set(limited.value.body) == {
        "message",
        "type",
        "param",
        "code",
    }
    facade.upstream.script(Reply(status=401, error={"error": {"message": "bad key sk-live-1"}}))
    with pytest.raises(openai.APIStatusError) as auth:
        await facade.client.chat.completions.create(
            model="character/Mira", messages=HELLO, stream=True
        )
    assert auth.value.status_code == 424 and auth.value.code == "auth_missing"
    assert "sk-live-1" not in auth.value.response.text
    async with facade.server.client() as raw:
        not_json = await raw.post("/v1/chat/completions", content=b"{oops")
        not_utf8 = await raw.post("/v1/chat/completions", content=b'{"model": "\xff"}')
        not_object = await raw.post("/v1/chat/completions", content=b"[1]")
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == "invalid_json"
    assert not_utf8.status_code == 400
    assert not_utf8.json()["error"]["code"] == "invalid_json"
    assert not_object.status_code == 400
    assert not_object.json()["error"]["code"] == "invalid_value"
    assert "oops" not in not_json.text  # the input is never echoed


async def test_a_body_over_the_cap_is_a_413_in_openais_shape(tmp_path: Path) -> None:
    capped = settings(tmp_path / "home", upload_max_bytes=4096)
    async with live_server(capped) as server, server.client() as raw:
        body = json.dumps(
            {"model": "profile/x", "messages": [{"role": "user", "content": "y" * 9000}]}
        )
        announced = await raw.post("/v1/chat/completions", content=body.encode())

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: cut off as it arrives
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000].encode()

        streamed = await raw.post("/v1/chat/completions", content=chunks())
    # refused before a byte is read, and cut off while it arrives: the same 413 either way
    for refused in (announced, streamed):
        assert refused.status_code == 413
        error = refused.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error" and error["code"] == "request_too_large"
        assert "4096" in error["message"]


@with_loopback
async def test_the_facade_needs_a_token_when_accounts_are_on(users: Users) -> None:
    async with HangingServer([Reply(text="Hi ann.")]) as upstream:
        state = users.server.state
        user, _ = await state.accounts.store.find_user("ann")
        await stock_world(state.tavern.for_owner(str(user.owner)), upstream.base_url)
        anonymous = openai.AsyncOpenAI(
            base_url=users.server.url + "/v1", api_key="not-a-token", max_retries=0
        )
        with pytest.raises(openai.AuthenticationError) as refused:
            await anonymous.models.list()
        assert refused.value.code == "invalid_api_key"
        await anonymous.close()
        token = users.ann.headers["authorization"].removeprefix("Bearer ")
        ann = openai.AsyncOpenAI(base_url=users.server.url + "/v1", api_key=token, max_retries=0)
        models = [m.id async for m in ann.models.list()]
        assert models == ["character/Mira", "profile/scripted", "profile/embedded"]
        reply = await ann.chat.completions.create(model="character/Mira", messages=HELLO)
        assert reply.choices[0].message.content == "Hi ann."
        await ann.close()
        # bob has no such character: another user's models do not exist for him
        bob_token = users.bob.headers["authorization"].removeprefix("Bearer ")
        bob = openai.AsyncOpenAI(
            base_url=users.server.url + "/v1", api_key=bob_token, max_retries=0
        )
        with pytest.raises(openai.NotFoundError):
            await bob.chat.completions.create(model="character/Mira", messages=HELLO)
        await bob.close()


class WatchedUpstream(HangingServer):
    """A :class:`HangingServer` that notes when the other side closes a connection whose
    reply hangs (``closed``)."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = asyncio.Event()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def watch() -> None:
            await self.hanging.wait()  # the request is read: what comes now is its EOF
            await reader.read()
            self.closed.set()

        watcher = asyncio.create_task(watch())
        try:
            await super()._handle(reader, writer)
        finally:
            watcher.cancel()


async def test_a_client_leaving_a_proxied_stream_closes_the_upstream_request(
    tmp_path: Path,
) -> None:
    async with WatchedUpstream() as upstream, live_server(settings(tmp_path / "home")) as server:
        await stock_world(server.state.tavern, upstream.base_url)
        upstream.script(HangReply(text="Partly there", hang_after=1))
        body = {"model": "profile/scripted", "messages": HELLO, "stream": True}
        pieces: list[str] = []
        async with (
            server.client() as raw,
            raw.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    delta = json.loads(line[6:])["choices"][0]["delta"]
                    if delta.get("content"):
                        pieces.append(delta["content"])
                        break  # leave mid-reply: the block closes the connection
        assert pieces and "Partly there".startswith(pieces[0])
        await asyncio.wait_for(upstream.closed.wait(), 5)


async def test_a_proxied_completion_reads_its_profile_once(
    facade: Facade, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = facade.tk.store
    kinds: list[str] = []

    def counting(name: str) -> None:
        read = getattr(store, name)

        async def counted(kind: str, ref: str, **kw: Any) -> Any:
            kinds.append(kind)
            return await read(kind, ref, **kw)

        monkeypatch.setattr(store, name, counted)

    for name in ("get_record", "get_shared_record", "get"):
        counting(name)
    facade.upstream.script(Reply(text="Once."), Reply(text="Once more."))
    reply = await facade.client.chat.completions.create(model="profile/scripted", messages=HELLO)
    assert reply.choices[0].message.content == "Once."
    stream = await facade.client.chat.completions.create(
        model="profile/scripted", messages=HELLO, stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream]) == "Once more."
    # resolving the model read it; sending with it read nothing more
    assert kinds.count("connection_profile") == 2
