"""Chat turns through the turn runner with real plans: the text-completion family, key pools
over the store, fallback chains with their stored notice, continuation of a cut stream, the
main chat's plugin hooks, inline reasoning split from the stream, and quiet_to_loud."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tavernkit.chat import ChatService
from tavernkit.chat.inspect import inspection
from tavernkit.errors import ChatBusy, GenerateTaskError
from tavernkit.generation.sink import RecordingSink
from tavernkit.models.chat import Message
from tavernkit.models.profile import (
    CapabilityOverrides,
    ConnectionProfile,
    CredentialRef,
    FallbackChain,
    FallbackEntry,
)
from tavernkit.models.templates import ReasoningTemplate
from tavernkit.plugins.hookspecs import hookimpl
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest

from ._server import Reply
from .conftest import World

NOW = 1_800_000_000.0


async def _messages(world: World, chat_id: str) -> list[Message]:
    stored = await world.chats.load(chat_id)
    return [Message.model_validate(m.data) for m in stored.messages]


async def _use_profile(world: World, profile: ConnectionProfile) -> None:
    await world.tk.store.put("connection_profile", profile)
    settings = await world.tk.settings()
    settings.selections.profile = profile.name
    await world.tk.store.put_settings(settings)


async def _update_profile(world: World, name: str, **update: Any) -> None:
    store, owner = world.tk.store, world.tk.owner
    stored = await store.get_record("connection_profile", name, owner=owner)
    profile = ConnectionProfile.model_validate(stored.data).model_copy(update=update)
    await store.put("connection_profile", profile, owner=owner, id=stored.info.id)


def _keys(world: World) -> list[str | None]:
    return [r.headers.get("authorization") for r in world.server.requests]


# -- the text-completion family ----------------------------------------------------------------


async def test_text_completion_chat_turn_send_and_continue(world: World) -> None:
    await _use_profile(
        world,
        ConnectionProfile(
            name="textgen",
            api="text",
            source="openai",
            base_url=world.server.base_url + "/v1",
            model="tg-1",
        ),
    )
    world.server.script(Reply(text=" The ferry leaves at nine."), Reply(text=" Sharp, mind you."))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "When do we leave?", sink=sink)
    assert out.status == "completed", out.error
    assert out.text == "The ferry leaves at nine."
    assert sink.text == "The ferry leaves at nine."
    first = world.server.requests[0]
    assert first.path == "/v1/completions"
    prompt = str(first.body["prompt"])
    assert "When do we leave?" in prompt and prompt.rstrip().endswith("Mira:")
    assert first.body["model"] == "tg-1" and first.body["stream"] is True

    cont = await world.chats.continue_(info.id)
    assert cont.status == "completed", cont.error
    # a text model continues its prompt: the reply so far is the prompt's tail
    assert str(world.server.requests[1].body["prompt"]).endswith("The ferry leaves at nine.")
    *_, reply = await _messages(world, info.id)
    assert reply.mes == "The ferry leaves at nine. Sharp, mind you."
    assert reply.swipes == [reply.mes]
    stored = await world.chats.load(info.id)
    assert all(m.partial_swipes == () for m in stored.messages)


async def test_text_completion_chat_turn_manual_prefill_is_the_prompt_tail(world: World) -> None:
    await _use_profile(
        world,
        ConnectionProfile(
            name="textgen",
            api="text",
            source="openai",
            base_url=world.server.base_url + "/v1",
            model="tg-1",
        ),
    )
    world.server.script(Reply(text=" nine, sharp."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "When?", prefill="At")
    assert out.status == "completed", out.error
    assert str(world.server.requests[0].body["prompt"]).endswith("Mira: At")
    assert out.text == "At nine, sharp."


# -- key pools ---------------------------------------------------------------------------------


async def _two_key_profile(world: World, **extra: Any) -> tuple[str, str]:
    store = world.tk.store
    k1 = await store.add_api_key("openai", "sk-one", owner=world.tk.owner, label="one")
    k2 = await store.add_api_key("openai", "sk-two", owner=world.tk.owner, label="two")
    await _use_profile(
        world,
        ConnectionProfile(
            name="pooled",
            api="chat",
            source="openai",
            base_url=world.server.base_url + "/v1",
            model="m1",
            credentials=[CredentialRef(key_id=k1), CredentialRef(key_id=k2)],
            **extra,
        ),
    )
    return k1, k2


async def test_rate_limited_key_rotates_to_the_next_and_cools_in_the_store(world: World) -> None:
    k1, k2 = await _two_key_profile(world)
    world.chats.key_clock = lambda: NOW
    world.server.script(
        Reply(status=429, headers={"retry-after": "90"}), Reply(text="Second key speaking.")
    )
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hello")
    assert out.status == "completed", out.error
    assert out.text == "Second key speaking."
    assert _keys(world) == ["Bearer sk-one", "Bearer sk-two"]
    assert out.result is not None
    assert [(a.key_id, a.outcome) for a in out.result.attempts] == [
        (k1, "error"),
        (k2, "completed"),
    ]
    # a rotation within the primary model is not a fallback: no notice
    assert out.result.notice is None
    # the key rests for the model that was limited (a row of its own per model)
    state = await world.tk.store.get_key_state(k1, owner=world.tk.owner, model="m1")
    assert state.last_error_code == "rate_limit"
    assert state.cooldown_until is not None and state.cooldown_until.timestamp() == NOW + 90
    # the next turn (a new service: a new process) skips the cooling key straight away
    world.server.script(Reply(text="Again."))
    later = ChatService(world.tk.runtime, key_clock=lambda: NOW + 10, stream_interval=0)
    again = await later.send(info.id, "Once more")
    assert again.text == "Again."
    assert _keys(world)[-1] == "Bearer sk-two"
    used = await world.tk.store.get_key_state(k2, owner=world.tk.owner)
    assert used.uses == 2


async def test_a_cut_stream_is_continued_by_the_next_key(world: World) -> None:
    await _two_key_profile(world)
    world.server.script(
        Reply(text="The tide turns. At nine it runs out.", break_after=4),
        Reply(text="At nine it runs out."),
    )
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Tell me of the tide", sink=sink)
    assert out.status == "completed", out.error
    assert out.text == "The tide turns. At nine it runs out."
    assert sink.text == out.text
    # the second attempt was told what was already shown (a native assistant prefill)
    sent = world.server.requests[1].body["messages"]
    assert sent[-1]["role"] == "assistant" and sent[-1]["content"].startswith("The tide turns.")
    assert out.result is not None and out.result.counters.continuations == 1
    *_, reply = await _messages(world, info.id)
    assert reply.mes == "The tide turns. At nine it runs out."
    assert reply.swipes == [reply.mes]


# -- fallback chains ---------------------------------------------------------------------------


async def _chain(world: World) -> None:
    await world.tk.store.put(
        "fallback_chain",
        FallbackChain(name="backup", entries=[FallbackEntry(profile="scripted", model="m2")]),
    )
    await _update_profile(world, "scripted", fallback_chain="backup")


async def test_primary_failure_falls_back_and_stores_the_notice(world: World) -> None:
    await _chain(world)
    world.server.script(
        Reply(status=500, error={"error": {"message": "secret prompt echoed"}}),
        Reply(text="From the backup."),
    )
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Hello", sink=sink)
    assert out.status == "completed", out.error
    assert out.text == "From the backup."
    assert [r.body["model"] for r in world.server.requests] == ["m1", "m2"]
    assert [n.model for n in sink.notices] == ["m2"]
    *_, reply = await _messages(world, info.id)
    assert out.result is not None and out.result.attempt_index == 1
    wire = reply.to_wire()
    notice = wire["extra"]["extensions"]["fallback_notice"]
    assert notice["model"] == "m2" and notice["index"] == 1
    assert notice["failures"] == [{"index": 0, "model": "m1", "class": "overloaded", "code": "500"}]
    assert "secret prompt" not in str(wire)
    assert "Answered by fallback model m2" in notice["text"]


async def test_a_fallback_of_the_other_prompt_family_is_skipped(world: World) -> None:
    await world.tk.store.put(
        "connection_profile",
        ConnectionProfile(
            name="textgen", api="text", source="openai", base_url=world.server.base_url + "/v1"
        ),
    )
    await world.tk.store.put(
        "fallback_chain", FallbackChain(name="backup", entries=[FallbackEntry(profile="textgen")])
    )
    await _update_profile(world, "scripted", fallback_chain="backup")
    world.server.script(Reply(status=500))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hello")
    assert out.status == "failed"
    assert len(world.server.requests) == 1
    assert out.result is not None
    assert [a.outcome for a in out.result.attempts] == ["error", "skipped"]
    assert out.result.attempts[1].reason == "a text profile cannot take this chat prompt"


# -- hooks -------------------------------------------------------------------------------------


class _Plugin:
    def __init__(self) -> None:
        self.scopes: list[str] = []
        self.turns: list[tuple[str | None, str]] = []
        self.after: list[tuple[str, str]] = []

    @hookimpl
    def before_request(self, request: PromptRequest, stream: bool, scope: str) -> Any:
        self.scopes.append(scope)
        if scope != "main" or not isinstance(request, ChatPrompt):
            return None
        sampling = dataclasses.replace(request.sampling, temperature=0.25)
        return dataclasses.replace(request, sampling=sampling)

    @hookimpl
    def before_chat_turn(self, chat_id: str | None, kind: str, request: PromptRequest) -> Any:
        self.turns.append((chat_id, kind))
        return None

    @hookimpl
    def after_chat_turn(self, chat_id: str | None, kind: str, result: Any) -> None:
        self.after.append((kind, result.status))


async def test_main_chat_hooks_run_for_chat_turns_and_not_for_tasks(world: World) -> None:
    plugin = _Plugin()
    world.tk.plugins.register(plugin, name="test-plugin")
    world.server.script(Reply(text="Hooked."), Reply(text="Task done."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hello")
    assert out.status == "completed"
    assert world.server.requests[0].body["temperature"] == 0.25
    assert plugin.turns == [(info.id, "normal")] and plugin.after == [("normal", "completed")]

    task = await world.tk.context(info.id).generate_task(
        [{"role": "user", "content": "Summarize."}]
    )
    assert task.assistant_text == "Task done."
    # every request passes before_request with its scope; only chat turns are "main"
    assert plugin.scopes == ["main", "extension_internal"]
    assert world.server.requests[1].body.get("temperature") != 0.25
    assert plugin.turns == [(info.id, "normal")] and len(plugin.after) == 1


# -- reasoning written inline ------------------------------------------------------------------


async def test_inline_think_tags_are_split_into_stored_reasoning(world: World) -> None:
    await world.tk.store.put("reasoning", ReasoningTemplate(name="Think XML"))
    tags = CapabilityOverrides(reasoning_format="tags")
    await _update_profile(world, "scripted", capabilities=tags)
    world.server.script(Reply(chunks=["<thi", "nk>pl", "an</th", "ink>Hel", "lo"]))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Hi", sink=sink)
    assert out.status == "completed", out.error
    assert (out.text, out.reasoning) == ("Hello", "plan")
    assert sink.text == "Hello" and "<think>" not in sink.text
    *_, reply = await _messages(world, info.id)
    assert (reply.mes, reply.current_reasoning) == ("Hello", "plan")


async def test_without_a_tags_format_the_text_is_left_alone(world: World) -> None:
    await world.tk.store.put("reasoning", ReasoningTemplate(name="Think XML"))
    world.server.script(Reply(text="<think>plan</think>Hello"))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hi")
    assert out.text == "<think>plan</think>Hello" and out.reasoning == ""


# -- quiet_to_loud -----------------------------------------------------------------------------


async def test_generate_quiet_prompt_quiet_to_loud_appends_the_reply(world: World) -> None:
    world.server.script(Reply(text="The gulls are loud tonight."))
    info = await world.chats.new_chat("Mira")
    world.tk._chats = world.chats  # the Tavern's chat service is the one under test
    context = world.tk.context(info.id)
    text = await context.generate_quiet_prompt("Describe the weather.", quiet_to_loud=True)
    assert text == "The gulls are loud tonight."
    _greeting, reply = await _messages(world, info.id)
    assert (reply.name, reply.is_user, reply.mes) == ("Mira", False, text)
    assert reply.extra.model == "m1"
    body = world.server.requests[0].body
    assert "Describe the weather." in str(body["messages"][-1]["content"])


async def test_quiet_to_loud_needs_a_chat_and_a_free_slot(world: World) -> None:
    with pytest.raises(GenerateTaskError) as caught:
        await world.tk.context().generate_quiet_prompt("x", quiet_to_loud=True)
    assert caught.value.code == "unsupported_api"
    info = await world.chats.new_chat("Mira")
    async with world.tk.chats.slots.turn(info.id):
        with pytest.raises(ChatBusy):
            await world.tk.context(info.id).generate_quiet_prompt("x", quiet_to_loud=True)
    assert len(await _messages(world, info.id)) == 1


class _EditingPlugin:
    """Edits the main chat's requests: a note before the turn, a temperature per request."""

    def __init__(self) -> None:
        self.turns: list[str] = []

    @hookimpl
    def before_chat_turn(self, chat_id: str | None, kind: str, request: PromptRequest) -> Any:
        self.turns.append(kind)
        if not isinstance(request, ChatPrompt):
            return None
        note = ChatMessage(role="system", content="[plugin note]")
        return dataclasses.replace(request, messages=(*request.messages, note))

    @hookimpl
    def before_request(self, request: PromptRequest, stream: bool, scope: str) -> Any:
        if not isinstance(request, ChatPrompt):
            return None
        sampling = dataclasses.replace(request.sampling, temperature=0.25)
        return dataclasses.replace(request, sampling=sampling)


async def test_preview_runs_the_request_hooks_so_it_shows_what_is_sent(world: World) -> None:
    plugin = _EditingPlugin()
    world.tk.plugins.register(plugin, name="editing-plugin")
    world.server.script(Reply(text="Edited."))
    info = await world.chats.new_chat("Mira")
    preview = await world.chats.preview(info.id)
    await world.chats.send(info.id, "")
    received = world.server.requests[-1].body
    data = inspection(preview)
    assert data["request"]["messages"] == received["messages"]
    assert received["messages"][-1] == {"role": "system", "content": "[plugin note]"}
    assert data["request"]["temperature"] == received["temperature"] == 0.25
    # the request as built is kept beside it, without the hooks' changes
    built = data["request_as_built"]
    assert built["messages"] == received["messages"][:-1]
    assert built.get("temperature") != 0.25
    # the hooks ran for the preview as for the turn (no after_chat_turn: no turn ended)
    assert plugin.turns == ["normal", "normal"]


async def test_preview_without_hooks_that_change_it_shows_one_request(world: World) -> None:
    world.server.script(Reply(text="Plain."))
    info = await world.chats.new_chat("Mira")
    preview = await world.chats.preview(info.id)
    assert preview.built_request is None
    assert "request_as_built" not in inspection(preview)


async def test_a_fallback_to_claude_converts_from_the_blocks_as_a_direct_request_would(
    world: World,
) -> None:
    # The primary is OpenAI-shaped; the fallback speaks Anthropic's Messages API. Its request
    # must be SillyTavern's Claude conversion of the prompt builder's labelled blocks (system
    # prompt, names, user-first), exactly what a turn sent straight to that profile sends, not
    # the Claude adapter's reading of the OpenAI-shaped messages of the first attempt.
    claude = ConnectionProfile(
        name="claude",
        api="chat",
        source="claude",
        base_url=world.server.base_url,
        model="claude-sonnet-4-5",
    )
    await world.tk.store.put("connection_profile", claude)
    await world.tk.store.put(
        "fallback_chain", FallbackChain(name="backup", entries=[FallbackEntry(profile="claude")])
    )
    await _update_profile(world, "scripted", fallback_chain="backup")
    info = await world.chats.new_chat("Mira")
    await world.tk.store.append_message(info.id, {"name": "Ada", "is_user": True, "mes": "Hello"})
    direct = inspection(await world.chats.preview(info.id, overrides={"profile": "claude"}))
    world.server.script(Reply(status=500, error={"error": {"message": "down"}}), Reply(text="Hi."))
    out = await world.chats.send(info.id, "")
    assert out.status == "completed", out.error
    first, second = world.server.requests
    assert first.path == "/v1/chat/completions" and second.path == "/v1/messages"
    assert second.body == direct["request"]
    # the conversion really differs from the first attempt's shape: SillyTavern's Claude
    # converter (no system prompt) turns the system messages into user turns
    assert first.body["messages"][0]["role"] == "system"
    assert {m["role"] for m in second.body["messages"]} <= {"user", "assistant"}
