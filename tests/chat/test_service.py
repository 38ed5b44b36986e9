"""ChatService verbs end to end: store -> prompt -> turn runner -> scripted server -> store."""

from __future__ import annotations

import asyncio
import json

import pytest

from _lorebooks import tide_lorebook
from tavernkit.chat.incomplete import incomplete_reply
from tavernkit.chat.inspect import inspection, wire_body
from tavernkit.errors import ChatBusy, ChatTurnError, Conflict, GenerateTaskError
from tavernkit.generation.sink import RecordingSink
from tavernkit.models.chat import Message
from tavernkit.models.profile import ConnectionProfile
from tavernkit.plugins.hookspecs import hookimpl
from tavernkit.providers.request import PromptRequest

from ._server import HangReply, Reply
from .conftest import World


async def _messages(world: World, chat_id: str) -> list[Message]:
    stored = await world.chats.load(chat_id)
    return [Message.model_validate(m.data) for m in stored.messages]


async def test_new_chat_greetings_are_swipes_with_macros_evaluated(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    assert info.name == "Mira - 2025-01-31@14h05m10s"
    (greeting,) = await _messages(world, info.id)
    assert greeting.mes == "Welcome aboard, Ada."
    assert greeting.swipes == ["Welcome aboard, Ada.", "Mind the gap, Ada.", "Tickets, please."]
    assert greeting.swipe_id == 0
    stored = await world.chats.load(info.id)
    assert stored.header["chat_metadata"]["integrity"] == "id-1"
    shown = await world.chats.select_swipe(info.id, 2)
    assert shown.mes == "Tickets, please."
    (greeting,) = await _messages(world, info.id)
    assert (greeting.mes, greeting.swipe_id) == ("Tickets, please.", 2)


async def test_send_stores_user_message_then_reply_with_reasoning(world: World) -> None:
    world.server.script(Reply(text="The tide turns at nine.", reasoning="They asked about tides."))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "When does {{char}} sail?", sink=sink)
    assert out.status == "completed"
    assert out.text == "The tide turns at nine."
    assert out.reasoning == "They asked about tides."
    assert (out.message_index, out.swipe_index) == (2, 0)
    assert sink.text == "The tide turns at nine."
    _, user, reply = await _messages(world, info.id)
    # SillyTavern evaluates macros of user input when it stores it
    assert (user.is_user, user.name, user.mes) == (True, "Ada", "When does Mira sail?")
    assert (reply.name, reply.mes, reply.swipes, reply.swipe_id) == (
        "Mira",
        "The tide turns at nine.",
        ["The tide turns at nine."],
        0,
    )
    assert reply.current_reasoning == "They asked about tides."
    assert reply.extra.api == "openai"
    assert reply.gen_started is not None and reply.gen_finished is not None
    stored = await world.chats.load(info.id)
    assert all(m.partial_swipes == () for m in stored.messages)
    body = world.server.requests[-1].body
    assert body["model"] == "m1"
    assert body["messages"][-1] == {"role": "user", "content": "When does Mira sail?"}


async def test_swipe_adds_an_alternative_and_swiping_back_restores_the_first(world: World) -> None:
    world.server.script(
        Reply(text="First answer.", reasoning="r1"), Reply(text="Second answer.", reasoning="r2")
    )
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    out = await world.chats.swipe(info.id)
    assert (out.text, out.swipe_index, out.message_index) == ("Second answer.", 1, 2)
    # the swiped reply is not part of the swipe's prompt
    sent = world.server.requests[-1].body["messages"]
    assert all("First answer." not in str(m.get("content")) for m in sent)
    assert sent[-1]["content"] == "Hello"
    *_, reply = await _messages(world, info.id)
    assert reply.swipes == ["First answer.", "Second answer."]
    assert (reply.mes, reply.current_reasoning) == ("Second answer.", "r2")
    await world.chats.select_swipe(info.id, 0)
    *_, reply = await _messages(world, info.id)
    assert (reply.mes, reply.swipe_id, reply.current_reasoning) == ("First answer.", 0, "r1")
    await world.chats.select_swipe(info.id, 1)
    *_, reply = await _messages(world, info.id)
    assert (reply.mes, reply.current_reasoning) == ("Second answer.", "r2")


async def test_regenerate_replaces_the_last_reply(world: World) -> None:
    world.server.script(Reply(text="Old."), Reply(text="New."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    out = await world.chats.regenerate(info.id)
    assert out.text == "New."
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages[1:]] == ["Hello", "New."]
    assert messages[-1].swipes == ["New."]
    assert world.server.requests[-1].body["messages"][-1]["content"] == "Hello"


async def test_continue_extends_the_last_reply(world: World) -> None:
    world.server.script(Reply(text="The lamp"), Reply(text=" is lit."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    out = await world.chats.continue_(info.id)
    assert out.text == "The lamp is lit."
    *_, reply = await _messages(world, info.id)
    assert (reply.mes, reply.swipes) == ("The lamp is lit.", ["The lamp is lit."])
    # the continued reply is in the prompt, so the model can extend it
    contents = [str(m.get("content")) for m in world.server.requests[-1].body["messages"]]
    assert any("The lamp" in c for c in contents)


async def test_impersonate_returns_the_users_next_message_and_stores_nothing(
    world: World,
) -> None:
    world.server.script(Reply(text="Reply."), Reply(text="I would like a ticket."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    before = await _messages(world, info.id)
    out = await world.chats.impersonate(info.id)
    assert (out.kind, out.text, out.message_index) == (
        "impersonate",
        "I would like a ticket.",
        None,
    )
    assert await _messages(world, info.id) == before


async def test_edit_delete_and_branch(world: World) -> None:
    world.server.script(Reply(text="One."), Reply(text="Two."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "a")
    await world.chats.send(info.id, "b")
    edited = await world.chats.edit(info.id, 2, "One, edited.")
    assert edited.swipes == ["One, edited."]
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages] == ["Welcome aboard, Ada.", "a", "One, edited.", "b", "Two."]
    branch = await world.chats.branch(info.id, 2)
    branched = await _messages(world, branch.id)
    assert [m.mes for m in branched] == ["Welcome aboard, Ada.", "a", "One, edited."]
    stored = await world.chats.load(branch.id)
    assert stored.header["chat_metadata"]["main_chat"] == info.name
    assert stored.info.character_name == "Mira"
    assert await world.chats.delete(info.id, 1) == 1
    assert [m.mes for m in await _messages(world, info.id)] == [
        "Welcome aboard, Ada.",
        "One, edited.",
        "b",
        "Two.",
    ]
    # the branch is a copy: deleting in the original does not touch it
    assert len(await _messages(world, branch.id)) == 3


async def test_a_second_turn_is_busy_and_interrupt_keeps_the_first_turns_text(
    world: World,
) -> None:
    world.server.script(
        HangReply(text="Partly. said and then more words", hang_after=1), Reply(text="Fresh.")
    )
    info = await world.chats.new_chat("Mira")
    first = asyncio.create_task(world.chats.send(info.id, "Hello"))
    await asyncio.wait_for(world.server.hanging.wait(), 10)
    assert world.chats.busy(info.id)
    with pytest.raises(ChatBusy):
        await world.chats.send(info.id, "Again")
    with pytest.raises(ChatBusy):
        await world.chats.swipe(info.id)
    second = await world.chats.send(info.id, "Again", interrupt=True)
    done = await first
    assert done.status == "aborted"
    assert second.status == "completed"
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages[1:]] == ["Hello", done.text, "Again", "Fresh."]
    assert not world.chats.busy(info.id)


async def test_stop_keeps_what_was_delivered(world: World) -> None:
    world.server.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    task = asyncio.create_task(world.chats.send(info.id, "Hello", sink=sink))
    await asyncio.wait_for(world.server.hanging.wait(), 10)
    for _ in range(200):
        if sink.text:
            break
        await asyncio.sleep(0.01)
    assert world.chats.stop(info.id)
    out = await task
    assert out.status == "aborted"
    *_, reply = await _messages(world, info.id)
    assert reply.mes == out.text == sink.text
    assert reply.mes.startswith("Wait.")
    # kept as shown, but marked unfinished: a resumed chat says it was stopped (issue 18)
    stored = await world.chats.load(info.id)
    assert stored.messages[-1].partial_swipes == (0,)
    unfinished = incomplete_reply(stored.messages[-1])
    assert unfinished is not None and unfinished.error_class == "stopped"
    assert unfinished.text() == "stopped before the end"


async def test_the_streaming_swipe_is_in_the_store_marked_partial(world: World) -> None:
    world.server.script(HangReply(text="Wait. the rest never comes", hang_after=1))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    task = asyncio.create_task(world.chats.send(info.id, "Hello", sink=sink))
    await asyncio.wait_for(world.server.hanging.wait(), 10)
    for _ in range(200):
        stored = await world.chats.load(info.id)
        if len(stored.messages) == 3 and stored.messages[-1].data["mes"]:
            break
        await asyncio.sleep(0.01)
    assert stored.messages[-1].data["mes"].startswith("Wait.")
    assert stored.messages[-1].partial_swipes == (0,)
    world.server.release.set()
    out = await task
    assert out.text == "Wait. the rest never comes"
    assert (await world.chats.load(info.id)).messages[-1].partial_swipes == ()


async def test_a_failed_turn_keeps_the_user_message_and_no_empty_reply(world: World) -> None:
    world.server.script(Reply(status=500, error={"error": {"message": "boom"}}))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hello")
    assert out.status == "failed" and out.error is not None
    assert [m.mes for m in await _messages(world, info.id)] == ["Welcome aboard, Ada.", "Hello"]


async def test_variables_set_by_user_macros_are_persisted(world: World) -> None:
    world.server.script(Reply(text="Noted."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "{{setvar::mood::calm}}Hi")
    stored = await world.chats.load(info.id)
    assert stored.header["chat_metadata"]["variables"] == {"mood": "calm"}
    assert stored.messages[1].data["mes"] == "Hi"


async def test_preview_is_what_the_provider_receives(world: World) -> None:
    world.server.script(Reply(text="Ok."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "First")
    for kind, verb in (("regenerate", world.chats.regenerate), ("swipe", world.chats.swipe)):
        preview = await world.chats.preview(info.id, kind=kind)
        await verb(info.id)
        body = wire_body(preview)
        received = world.server.requests[-1].body
        assert body["messages"] == received["messages"]
        assert body["model"] == received["model"]
    preview = await world.chats.preview(info.id)
    await world.chats.send(info.id, "")
    assert wire_body(preview)["messages"] == world.server.requests[-1].body["messages"]


class _TurnRequests:
    """Records the request each main-chat turn hands the turn runner."""

    def __init__(self) -> None:
        self.seen: list[PromptRequest] = []

    @hookimpl
    def before_chat_turn(self, chat_id: str | None, kind: str, request: PromptRequest) -> None:
        self.seen.append(request)


async def test_the_inspector_and_the_provider_receive_the_same_object(world: World) -> None:
    # One request family: the preview's request is a provider request, the one the turn
    # hands the runner, labels and all; the inspector's rows and wire body are read from it.
    recorder = _TurnRequests()
    world.tk.plugins.register(recorder, name="recorder")
    world.server.script(Reply(text="Ok."))
    info = await world.chats.new_chat("Mira")
    await world.tk.store.append_message(info.id, {"name": "Ada", "is_user": True, "mes": "Hi"})
    preview = await world.chats.preview(info.id)
    shown = inspection(preview)
    assert (await world.chats.send(info.id, "")).status == "completed"
    sent = recorder.seen[-1]
    assert type(sent) is type(preview.request)
    assert sent == preview.request
    assert [m.label for m in sent.messages] == [m.label for m in preview.request.messages]
    assert [b["identifier"] for b in shown["blocks"]] == [
        m.label.identifier if m.label is not None else "added" for m in sent.messages
    ]
    assert shown["request"] == world.server.requests[-1].body


async def test_quiet_stores_nothing_unless_quiet_to_loud(world: World) -> None:
    world.server.script(Reply(text="Quiet."), Reply(text="Loud."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.quiet(info.id, "Summarize.")
    assert out.text == "Quiet."
    assert world.server.requests[-1].body["messages"][-1]["content"] == "Summarize."
    assert len(await _messages(world, info.id)) == 1
    loud = await world.chats.quiet(info.id, "Say it.", quiet_to_loud=True)
    assert loud.message_index == 1
    assert [m.mes for m in await _messages(world, info.id)][-1] == "Loud."


async def test_swipe_needs_a_reply(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    await world.chats.delete(info.id, 0)
    with pytest.raises(Conflict):
        await world.chats.swipe(info.id)


async def test_manual_prefill_starts_the_reply(world: World) -> None:
    world.server.script(Reply(text=" the ferry leaves at nine."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "When?", prefill="Well,")
    assert out.text.startswith("Well,")
    sent = world.server.requests[-1].body["messages"]
    assert sent[-1] == {"role": "assistant", "content": "Well,"}


async def test_timed_world_info_state_is_persisted_with_the_turn(world: World) -> None:
    book = tide_lorebook(sticky=3)
    await world.tk.library.import_bytes(json.dumps(book).encode(), source="ferry.json")
    settings = await world.tk.settings()
    settings.world_info.global_books = ["ferry"]
    await world.tk.store.put_settings(settings)
    world.server.script(Reply(text="Nine."))
    info = await world.chats.new_chat("Mira")
    preview = await world.chats.preview(info.id)
    assert preview.wi is None or not preview.wi.activated
    await world.chats.send(info.id, "When is the tide?")
    sent = world.server.requests[-1].body["messages"]
    assert any("The tide turns at nine." in str(m["content"]) for m in sent)
    stored = await world.chats.load(info.id)
    sticky = stored.header["chat_metadata"]["timedWorldInfo"]["sticky"]
    assert list(sticky) == ["ferry.0"]


async def test_renderer_providers_reach_chat_turns(world: World) -> None:
    world.server.script(Reply(text="Nine sharp."))
    world.tk.prompt_renderer.register_function_provider(
        "tide_time", lambda args, variables, configurable: "at nine"
    )
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Does the tide turn {{tide_time}}?")
    body = world.server.requests[-1].body
    assert body["messages"][-1]["content"] == "Does the tide turn at nine?"


async def test_a_verb_refuses_an_option_no_verb_takes_before_writing(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    with pytest.raises(TypeError, match="strem"):
        await world.chats.send(info.id, "Hello", strem=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="prefill"):
        await world.chats.continue_(info.id, prefill="So")  # type: ignore[call-arg]
    assert len((await world.chats.load(info.id)).messages) == 1
    assert world.server.requests == []


async def test_the_shared_options_keep_their_defaults_per_verb(world: World) -> None:
    world.server.script(Reply(text="Aye."), Reply(text="A summary."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Ready?")
    await world.chats.quiet(info.id, "Summarize the chat.")
    sent, quiet = (r.body for r in world.server.requests)
    assert sent["stream"] is True  # the verbs stream by default
    assert not quiet.get("stream")  # a quiet generation does not


async def test_a_turn_that_cannot_run_raises_a_chat_turn_error(world: World) -> None:
    # ChatTurnError is a chat turn's own type; it subclasses GenerateTaskError (same codes and
    # details), so code that caught that keeps working.
    info = await world.chats.new_chat("Mira")
    with pytest.raises(ChatTurnError) as unknown:
        await world.chats.send(info.id, "Hello", overrides={"profile": "nowhere"})
    assert unknown.value.code == "invalid_input"
    assert unknown.value.details["field"] == "profile"
    assert isinstance(unknown.value, GenerateTaskError)
    assert repr(unknown.value).startswith("ChatTurnError('invalid_input'")
    # the connection resolver is shared with generate_task: its error is re-raised as the
    # turn's, chained to the original
    await world.tk.store.put("connection_profile", ConnectionProfile(name="bare", source="x-y"))
    with pytest.raises(ChatTurnError) as unresolved:
        await world.chats.preview(info.id, overrides={"profile": "bare"})
    assert unresolved.value.details["field"] == "base_url"
    cause = unresolved.value.__cause__
    assert isinstance(cause, GenerateTaskError) and not isinstance(cause, ChatTurnError)
    # nothing was stored by the refused send
    assert [m.mes for m in await _messages(world, info.id)] == ["Welcome aboard, Ada."]
