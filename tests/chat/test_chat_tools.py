"""Main-chat tools end to end: the Tavern's registered tools offered in chat turns, the tool
loop run by the turn runner, invocations stored as SillyTavern stores them (their own system
message before the reply), stealth and ``should_register``, replay across a failed attempt,
and the prompt protocols for a model without native tools. A scripted OpenAI-compatible
server on loopback plays the model; the tools are real functions counting their runs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tavernkit.chat import ChatService
from tavernkit.chat.tool_messages import SYSTEM_USER_NAME
from tavernkit.errors import ChatTurnError
from tavernkit.generation.sink import RecordingSink
from tavernkit.models.chat import Message
from tavernkit.models.profile import (
    CapabilityOverrides,
    ConnectionProfile,
    FallbackChain,
    FallbackEntry,
)
from tavernkit.tools import FunctionTool, JsonProtocol, XmlProtocol, make_trigger_signal

from ._server import Reply
from .conftest import World

ROLL = {"sides": 6}


class Dice:
    """A tool that records every run (the count is what replay must not raise)."""

    def __init__(self, result: Any = 4, error: Exception | None = None) -> None:
        self.runs: list[dict[str, Any]] = []
        self.result = result
        self.error = error

    def __call__(self, args: dict[str, Any]) -> Any:
        self.runs.append(args)
        if self.error is not None:
            raise self.error
        return self.result


def _roll_tool(dice: Dice, **kw: Any) -> FunctionTool:
    return FunctionTool(
        name="roll",
        description="Roll a die",
        parameters={
            "type": "object",
            "properties": {"sides": {"type": "integer"}},
            "required": ["sides"],
        },
        action=dice,
        display_name="Dice",
        **kw,
    )


async def _tools_profile(world: World, *, native: bool, **update: Any) -> None:
    store, owner = world.tk.store, world.tk.owner
    stored = await store.get_record("connection_profile", "scripted", owner=owner)
    profile = ConnectionProfile.model_validate(stored.data).model_copy(
        update={"capabilities": CapabilityOverrides(supports_tools=native), **update}
    )
    await store.put("connection_profile", profile, owner=owner, id=stored.info.id)


async def _messages(world: World, chat_id: str) -> list[Message]:
    stored = await world.chats.load(chat_id)
    return [Message.model_validate(m.data) for m in stored.messages]


def _body(world: World, n: int) -> dict[str, Any]:
    return world.server.requests[n].body


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


# -- native tools ------------------------------------------------------------------------------


async def test_a_registered_tool_is_offered_run_and_its_invocation_stored(world: World) -> None:
    await _tools_profile(world, native=True)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    world.server.script(
        Reply(tool_calls=[("roll", ROLL)]),
        Reply(text="You rolled a four."),
        Reply(text="Shall we go again?"),
    )
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Roll for me", sink=sink)
    assert out.status == "completed", out.error
    assert out.text == "You rolled a four." == sink.text
    assert dice.runs == [ROLL]
    first = _body(world, 0)
    assert _tool_names(first) == ["roll"] and first["tool_choice"] == "auto"
    assert first["tools"][0]["function"]["parameters"]["required"] == ["sides"]
    # the follow-up carries the call and its result
    call_turn, result_turn = _body(world, 1)["messages"][-2:]
    assert call_turn["role"] == "assistant"
    assert call_turn["tool_calls"][0]["function"] == {"name": "roll", "arguments": '{"sides": 6}'}
    assert result_turn == {"role": "tool", "tool_call_id": "call_0", "content": "4"}

    # stored as SillyTavern stores it: a system message before the reply
    _greeting, user, tools, reply = await _messages(world, info.id)
    assert user.mes == "Roll for me" and reply.mes == "You rolled a four."
    assert tools.is_system and tools.name == SYSTEM_USER_NAME
    assert tools.extra.is_small_sys is True and tools.extra.model == reply.extra.model
    assert "Tool calls: Dice" in str(tools.mes)
    (stored,) = tools.extra.tool_invocations or []
    wire = stored.to_wire()
    assert (wire["name"], wire["parameters"], wire["result"]) == ("roll", '{"sides": 6}', "4")
    assert wire["displayName"] == "Dice" and wire["error"] is False
    assert reply.extra.tool_invocations is None  # the reply's text stays its text in prompts
    assert out.message_index == 3 and out.message_id is not None
    chat = await world.chats.load(info.id)
    assert chat.messages[3].id == out.message_id
    assert all(m.partial_swipes == () for m in chat.messages)

    # the next turn's prompt has the exchange back as a tool call and its result
    again = await world.chats.send(info.id, "Again")
    assert again.status == "completed", again.error
    roles = [(m["role"], m.get("content")) for m in _body(world, 2)["messages"]]
    at = roles.index(("user", "Roll for me"))
    assert [r for r, _ in roles[at : at + 4]] == ["user", "assistant", "tool", "assistant"]
    assert roles[at + 2] == ("tool", "4") and roles[at + 3] == ("assistant", "You rolled a four.")
    assert dice.runs == [ROLL]  # history is replayed to the model, the tool is not re-run


async def test_a_tool_that_raises_gives_its_error_to_the_model_and_the_turn_goes_on(
    world: World,
) -> None:
    await _tools_profile(world, native=True)
    dice = Dice(error=ValueError("the die fell overboard"))
    world.tk.tools.register_function_tool(_roll_tool(dice))
    world.server.script(Reply(tool_calls=[("roll", ROLL)]), Reply(text="The die is lost."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Roll")
    assert out.status == "completed", out.error
    assert out.text == "The die is lost."
    result_turn = _body(world, 1)["messages"][-1]
    assert result_turn["role"] == "tool"
    assert result_turn["content"] == "Error: ValueError: the die fell overboard"
    *_, tools, reply = await _messages(world, info.id)
    (stored,) = tools.extra.tool_invocations or []
    assert stored.to_wire()["error"] is True and reply.mes == "The die is lost."


async def test_should_register_is_asked_every_turn_and_no_leaves_the_tool_out(
    world: World,
) -> None:
    await _tools_profile(world, native=True)
    allowed = {"roll": False}

    async def maybe() -> bool:
        return allowed["roll"]

    world.tk.tools.register_function_tool(_roll_tool(Dice(), should_register=maybe))
    world.tk.tools.register_function_tool(
        FunctionTool(name="time", action=lambda _: "dusk", should_register=lambda: True)
    )
    world.server.script(Reply(text="Hello."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hi")
    assert _tool_names(_body(world, 0)) == ["time"]
    allowed["roll"] = True
    await world.chats.send(info.id, "Hi again")
    assert _tool_names(_body(world, 1)) == ["roll", "time"]
    world.tk.tools.unregister_function_tool("time")
    allowed["roll"] = False
    await world.chats.send(info.id, "And now?")
    assert "tools" not in _body(world, 2) and "tool_choice" not in _body(world, 2)
    # a continuation never starts a tool round (SillyTavern's canPerformToolCalls)
    allowed["roll"] = True
    await world.chats.continue_(info.id)
    assert "tools" not in _body(world, 3)


async def _stealth_notes(world: World) -> Dice:
    await _tools_profile(world, native=True)
    notes = Dice(result="noted")
    world.tk.tools.register_function_tool(FunctionTool(name="remember", action=notes, stealth=True))
    return notes


async def test_a_stealth_tool_runs_hidden_with_no_follow_up(world: World) -> None:
    notes = await _stealth_notes(world)
    world.server.script(
        Reply(text="I will remember that.", tool_calls=[("remember", {"fact": "tea"})]),
        Reply(text="Next turn."),
    )
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "I like tea")
    assert out.status == "completed", out.error
    assert out.text == "I will remember that."
    assert notes.runs == [{"fact": "tea"}]
    assert len(world.server.requests) == 1  # no follow-up generation after a stealth tool
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages[1:]] == ["I like tea", "I will remember that."]
    assert not any(m.is_system or m.extra.tool_invocations for m in messages)
    await world.chats.send(info.id, "What do I like?")
    sent = _body(world, 1)["messages"]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in sent)
    assert "noted" not in str(sent)


async def test_a_reply_that_is_only_a_tool_call_is_never_stored_as_an_empty_reply(
    world: World,
) -> None:
    notes = await _stealth_notes(world)
    world.server.script(Reply(tool_calls=[("remember", {"fact": "tea"})]))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "I like tea")
    assert out.status == "completed" and out.text == ""
    assert out.message_index is None and out.message_id is None
    assert notes.runs == [{"fact": "tea"}]
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages] == ["Welcome aboard, Ada.", "I like tea"]


async def test_tool_rounds_are_bounded_and_a_reply_of_calls_only_fails_unstored(
    world: World,
) -> None:
    await _tools_profile(world, native=True)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    chats = ChatService(world.tk.runtime, stream_interval=0, max_tool_rounds=2)
    world.server.script(Reply(tool_calls=[("roll", ROLL)]))  # the model never stops calling
    info = await chats.new_chat("Mira")
    out = await chats.send(info.id, "Roll forever")
    assert out.status == "failed" and out.error is not None
    assert out.error.code == "empty_response"
    assert len(dice.runs) == 2
    # two tool rounds, then the reply asked for with tools off (once more when empty)
    bodies = [r.body for r in world.server.requests]
    assert [_tool_names(b) for b in bodies] == [["roll"], ["roll"], [], []]
    messages = await _messages(world, info.id)
    assert [m.mes for m in messages] == ["Welcome aboard, Ada.", "Roll forever"]


async def test_a_swipe_that_calls_a_tool_stores_the_invocation_before_the_reply(
    world: World,
) -> None:
    await _tools_profile(world, native=True)
    dice = Dice()
    world.server.script(Reply(text="No dice yet."))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Roll")
    world.tk.tools.register_function_tool(_roll_tool(dice))
    world.server.script(Reply(tool_calls=[("roll", ROLL)]), Reply(text="A four."))
    out = await world.chats.swipe(info.id)
    assert out.status == "completed", out.error
    _, user, tools, reply = await _messages(world, info.id)
    assert user.mes == "Roll" and tools.is_system and tools.extra.tool_invocations
    assert reply.swipes == ["No dice yet.", "A four."] and reply.swipe_id == 1
    assert out.message_index == 3 and out.swipe_index == 1


# -- replay across attempts --------------------------------------------------------------------


async def test_a_failed_attempt_after_a_tool_ran_replays_the_call_without_rerunning_it(
    world: World,
) -> None:
    await _tools_profile(world, native=True, fallback_chain="backup")
    await world.tk.store.put(
        "fallback_chain",
        FallbackChain(name="backup", entries=[FallbackEntry(profile="scripted", model="m2")]),
    )
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    world.server.script(
        Reply(tool_calls=[("roll", ROLL)]),
        Reply(text="The die shows four. The ferry waits.", break_after=4),  # cut mid-stream
        Reply(tool_calls=[("roll", ROLL)]),  # the fallback asks for the same call again
        Reply(text="The ferry waits."),
    )
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Roll", sink=sink)
    assert out.status == "completed", out.error
    assert dice.runs == [ROLL]  # ran once: the fallback got the recorded result
    assert out.result is not None and out.result.counters.replayed_tools == 1
    assert [r.body["model"] for r in world.server.requests] == ["m1", "m1", "m2", "m2"]
    fallback_first = str(_body(world, 2)["messages"])
    assert "These tools already ran" in fallback_first and "roll" in fallback_first
    # the replayed call's recorded result went back to the model
    assert _body(world, 3)["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "4",
    }
    assert out.text == "The die shows four. The ferry waits." == sink.text
    *_, tools, reply = await _messages(world, info.id)
    assert reply.mes == out.text
    assert [i.to_wire()["name"] for i in tools.extra.tool_invocations or []] == ["roll"]


# -- prompt protocols --------------------------------------------------------------------------


async def test_a_model_without_native_tools_gets_them_through_prompt_xml(world: World) -> None:
    await _tools_profile(world, native=False)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    trigger = make_trigger_signal(random.Random(7))
    payload = XmlProtocol(trigger).render_calls([("roll", ROLL)])
    chats = ChatService(world.tk.runtime, stream_interval=0, tool_rng=random.Random(7))
    world.server.script(
        Reply(text=f"Let me see.\n{payload}"),
        Reply(text="A four."),
        Reply(text="Again?"),
    )
    info = await chats.new_chat("Mira")
    sink = RecordingSink()
    out = await chats.send(info.id, "Roll for me", sink=sink)
    assert out.status == "completed", out.error
    assert dice.runs == [ROLL]
    first = _body(world, 0)
    assert "tools" not in first
    system = [m["content"] for m in first["messages"] if m["role"] == "system"]
    guide = next(c for c in system if "You have access to the following available tools" in c)
    assert trigger in guide and "roll" in guide
    # the payload never reaches the user
    assert trigger not in sink.text and "function_call" not in sink.text
    assert trigger not in out.text and "A four." in out.text and "Let me see." in out.text
    # the follow-up: the call as protocol text, the result as a user message
    *_, call_turn, result_turn = _body(world, 1)["messages"]
    assert call_turn["role"] == "assistant" and trigger in call_turn["content"]
    assert "tool_calls" not in call_turn
    assert result_turn["role"] == "user"
    assert "- Tool name: roll" in result_turn["content"]
    assert "<tool_result>\n4\n</tool_result>" in result_turn["content"]
    *_, tools, reply = await _messages(world, info.id)
    assert tools.extra.tool_invocations and reply.mes == out.text
    # a later turn reads the stored exchange as protocol text too: no native tool messages
    await chats.send(info.id, "Again")
    later = _body(world, 2)["messages"]
    assert not any(m["role"] == "tool" or m.get("tool_calls") for m in later)
    assert any("<tool_result>\n4\n</tool_result>" in str(m["content"]) for m in later)


async def test_prompt_json_asked_for_is_used_even_where_native_tools_work(world: World) -> None:
    await _tools_profile(world, native=True)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    trigger = make_trigger_signal(random.Random(11))
    payload = JsonProtocol(trigger).render_calls([("roll", ROLL)])
    chats = ChatService(
        world.tk.runtime,
        stream_interval=0,
        function_call_mode="prompt_json",
        tool_rng=random.Random(11),
    )
    world.server.script(Reply(text=payload), Reply(text="Four it is."))
    info = await chats.new_chat("Mira")
    out = await chats.send(info.id, "Roll")
    assert out.status == "completed", out.error
    assert out.text == "Four it is." and dice.runs == [ROLL]
    assert "tools" not in _body(world, 0)
    assert "tool_calls" in str(_body(world, 0)["messages"])  # the JSON protocol's guide


async def test_an_unreadable_protocol_payload_is_shown_as_text(world: World) -> None:
    await _tools_profile(world, native=False)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    trigger = make_trigger_signal(random.Random(5))
    chats = ChatService(world.tk.runtime, stream_interval=0, tool_rng=random.Random(5))
    world.server.script(Reply(text=f"Hmm.\n{trigger}\nnot a call at all"))
    info = await chats.new_chat("Mira")
    out = await chats.send(info.id, "Roll")
    assert out.status == "completed", out.error
    assert dice.runs == [] and len(world.server.requests) == 1
    assert "not a call at all" in out.text


async def test_a_fallback_without_native_tools_speaks_the_protocol_in_the_same_turn(
    world: World,
) -> None:
    await _tools_profile(world, native=True, fallback_chain="backup")
    plain = ConnectionProfile(
        name="plain",
        api="chat",
        source="openai",
        base_url=world.server.base_url + "/v1",
        model="p1",
        capabilities=CapabilityOverrides(supports_tools=False),
    )
    await world.tk.store.put("connection_profile", plain)
    await world.tk.store.put(
        "fallback_chain", FallbackChain(name="backup", entries=[FallbackEntry(profile="plain")])
    )
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    trigger = make_trigger_signal(random.Random(2))
    chats = ChatService(world.tk.runtime, stream_interval=0, tool_rng=random.Random(2))
    world.server.script(
        Reply(status=503, error={"error": {"message": "busy"}}),
        Reply(text=XmlProtocol(trigger).render_calls([("roll", ROLL)])),
        Reply(text="Four, from the backup."),
    )
    info = await chats.new_chat("Mira")
    out = await chats.send(info.id, "Roll")
    assert out.status == "completed", out.error
    assert out.text == "Four, from the backup." and dice.runs == [ROLL]
    primary, fallback, _ = (r.body for r in world.server.requests)
    assert _tool_names(primary) == ["roll"]  # native on the model that has it
    assert fallback["model"] == "p1" and "tools" not in fallback
    assert trigger in str(fallback["messages"])


async def test_the_preview_shows_the_tools_the_next_turn_offers(world: World) -> None:
    await _tools_profile(world, native=True)
    world.tk.tools.register_function_tool(_roll_tool(Dice()))
    info = await world.chats.new_chat("Mira")
    preview = await world.chats.preview(info.id)
    assert [t.name for t in getattr(preview.request, "tools", ())] == ["roll"]
    assert preview.built_request is None  # the tools are the turn's, not a hook's change
    assert world.server.requests == []


@pytest.mark.parametrize("stream", [True, False], ids=["char-by-char stream", "no stream"])
async def test_the_protocol_payload_stays_hidden_however_it_arrives(
    world: World, stream: bool
) -> None:
    await _tools_profile(world, native=False)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    trigger = make_trigger_signal(random.Random(9))
    text = "Rolling now. " + XmlProtocol(trigger).render_calls([("roll", ROLL)])
    chats = ChatService(world.tk.runtime, stream_interval=0, tool_rng=random.Random(9))
    world.server.script(Reply(text=text, chunks=list(text)), Reply(text="Four."))
    info = await chats.new_chat("Mira")
    sink = RecordingSink()
    out = await chats.send(info.id, "Roll", sink=sink, stream=stream)
    assert out.status == "completed", out.error
    assert dice.runs == [ROLL]
    assert world.server.requests[0].body["stream"] is stream
    for shown in (sink.text, out.text):
        assert "Rolling now." in shown and "Four." in shown
        assert "<" not in shown and "roll" not in shown.lower().replace("rolling", "")


async def test_beside_a_stealth_tool_only_the_ordinary_ones_are_stored(world: World) -> None:
    notes = await _stealth_notes(world)
    dice = Dice()
    world.tk.tools.register_function_tool(_roll_tool(dice))
    both = [("roll", ROLL), ("remember", {"fact": "tea"})]
    world.server.script(Reply(text="Rolled, and noted.", tool_calls=both))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Roll and remember")
    assert out.status == "completed", out.error
    assert len(dice.runs) == len(notes.runs) == 1 and len(world.server.requests) == 1
    *_, tools, reply = await _messages(world, info.id)
    assert [i.to_wire()["name"] for i in tools.extra.tool_invocations or []] == ["roll"]
    assert "remember" not in str(tools.to_wire()) and reply.mes == "Rolled, and noted."
    # the same round with no text: no reply, so no tool message either
    world.server.script(Reply(tool_calls=both))
    quiet = await world.chats.send(info.id, "Again, silently")
    assert quiet.status == "completed" and quiet.message_index is None
    *_, last = await _messages(world, info.id)
    assert last.is_user and last.mes == "Again, silently"


# -- tools from plugins ------------------------------------------------------------------------


class _EntryPoint:
    def __init__(self, name: str, plugin: object) -> None:
        self.name, self.value, self._plugin = name, f"tests:{name}", plugin

    def load(self) -> object:
        return self._plugin


def test_a_plugin_registers_tools_on_every_tavern_it_loads_into(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tavernkit.facade import Tavern
    from tavernkit.plugins import hookimpl, manager

    dice = Dice()

    class DicePlugin:
        @hookimpl
        def register_tools(self, register: Callable[[FunctionTool], None]) -> None:
            register(_roll_tool(dice))

    monkeypatch.delenv(manager.LOAD_PLUGINS_ENV, raising=False)
    monkeypatch.setattr(
        manager, "_installed_entry_points", lambda: [_EntryPoint("dice", DicePlugin())]
    )
    first, second = Tavern(tmp_path / "a"), Tavern(tmp_path / "b")
    assert first.tools.names() == second.tools.names() == ["roll"]
    first.tools.unregister_function_tool("roll")
    assert second.tools.names() == ["roll"]  # each Tavern has its own registry
    assert Tavern(tmp_path / "c", load_plugins=False).tools.names() == []


async def test_a_crash_between_the_two_writes_keeps_the_reply(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _tools_profile(world, native=True)
    world.tk.tools.register_function_tool(_roll_tool(Dice()))
    world.server.script(Reply(tool_calls=[("roll", ROLL)]), Reply(text="A four."))
    store = world.tk.store
    real_update = store.update_message

    async def crash_on_tool_message(message_id: str, message: Any, **kw: Any) -> None:
        if isinstance(message, Message) and message.is_system:
            raise RuntimeError("power cut")
        await real_update(message_id, message, **kw)

    monkeypatch.setattr(store, "update_message", crash_on_tool_message)
    info = await world.chats.new_chat("Mira")
    with pytest.raises(RuntimeError, match="power cut"):
        await world.chats.send(info.id, "Roll")
    *_, place, reply = await _messages(world, info.id)
    assert reply.mes == "A four." and place.mes in ("", "A four.")


async def test_bad_tool_settings_are_typed_errors(world: World) -> None:
    with pytest.raises(ChatTurnError) as mode:
        ChatService(world.tk.runtime, function_call_mode="telepathy")
    assert mode.value.code == "invalid_input" and "telepathy" in mode.value.message
    with pytest.raises(ChatTurnError) as rounds:
        ChatService(world.tk.runtime, max_tool_rounds=0)
    assert rounds.value.details["field"] == "max_tool_rounds"


async def test_a_turns_tools_are_read_while_its_prompt_builds(world: World) -> None:
    """The tools are chosen as soon as the turn's connection is resolved, in a task of their
    own: a tool whose gate takes a while (an MCP server's list, a plugin asking a service)
    is being asked while the prompt's macros render, not after."""
    await _tools_profile(world, native=True)
    order: list[str] = []

    async def slow_gate() -> bool:
        order.append("tools asked")
        await asyncio.sleep(0.05)
        order.append("tools listed")
        return True

    def variables() -> dict[str, str]:
        order.append("prompt rendered")
        return {}

    world.tk.tools.register_function_tool(_roll_tool(Dice(), should_register=slow_gate))
    world.tk.prompt_renderer.register_variable_provider(variables)
    info = await world.chats.new_chat("Mira")
    order.clear()
    world.server.script(Reply(text="Aye."))
    assert (await world.chats.send(info.id, "Hello")).status == "completed"
    assert order[0] == "tools asked", order
    assert order.index("prompt rendered") < order.index("tools listed")
    assert _tool_names(_body(world, -1)) == ["roll"]  # and the tools were offered
