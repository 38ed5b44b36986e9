"""The prompt builder's block labels survive to every attempt of a real chat turn.

A scripted OpenAI-compatible server on loopback plays the models. Each test fails when the
labels are dropped on the way (the request then guesses: every non-system message is history,
nothing is tool-only): a fallback model without tools must not receive earlier tool calls and
results, a smaller fallback window must trim chat history only (world-info depth injections and
an in-chat author's note stay, whatever their role), and the prompt inspector must read the
very request the turn runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernkit.chat import ChatService, turn_core
from tavernkit.chat.authors_note import NOTE_POSITIONS, NOTE_ROLES, set_authors_note
from tavernkit.chat.inspect import inspection
from tavernkit.generation.attempt.chat_prompt import ByteEstimate, message_tokens
from tavernkit.generation.attempt.text_prompt import TextTurnPrompt
from tavernkit.models.chat import Message
from tavernkit.models.profile import (
    CapabilityOverrides,
    ConnectionProfile,
    FallbackChain,
    FallbackEntry,
)
from tavernkit.providers.request import ChatPrompt, TextPrompt
from tavernkit.tools import FunctionTool

from ._server import Reply
from .conftest import World

NOTE = "[Author's note: the fog is thick tonight.]"
LORE = "[Lore: the ferry's bell rings twice at the crossing.]"
RESERVE = 64
GREETING = "Welcome aboard, Ada."


async def _fallback(world: World, **capabilities: Any) -> None:
    """The active profile ("scripted", model m1) falls back to "small" (model s1)."""
    small = ConnectionProfile(
        name="small",
        api="chat",
        source="openai",
        base_url=world.server.base_url + "/v1",
        model="s1",
        capabilities=CapabilityOverrides(**capabilities),
    )
    store, owner = world.tk.store, world.tk.owner
    await store.put("connection_profile", small)
    await store.put(
        "fallback_chain", FallbackChain(name="backup", entries=[FallbackEntry(profile="small")])
    )
    stored = await store.get_record("connection_profile", "scripted", owner=owner)
    primary = ConnectionProfile.model_validate(stored.data).model_copy(
        update={
            "fallback_chain": "backup",
            "capabilities": CapabilityOverrides(supports_tools=True),
        }
    )
    await store.put("connection_profile", primary, owner=owner, id=stored.info.id)


async def test_a_fallback_without_tools_gets_no_earlier_tool_calls_or_results(
    world: World,
) -> None:
    runs: list[dict[str, Any]] = []
    world.tk.tools.register_function_tool(
        FunctionTool(
            name="roll",
            description="Roll a die",
            parameters={"type": "object", "properties": {"sides": {"type": "integer"}}},
            action=lambda args: runs.append(args) or 4,
        )
    )
    await _fallback(world, supports_tools=False)
    # native only: an attempt on a model without tools gets no tools at all
    chats = ChatService(world.tk.runtime, stream_interval=0, function_call_mode="native")
    world.server.script(
        Reply(tool_calls=[("roll", {"sides": 6})]),
        Reply(text="You rolled a four."),
        Reply(status=503, error={"error": {"message": "busy"}}),
        Reply(text="From the backup."),
    )
    info = await chats.new_chat("Mira")
    first = await chats.send(info.id, "Roll for me")
    assert first.status == "completed", first.error
    assert runs == [{"sides": 6}]

    out = await chats.send(info.id, "Again?")
    assert out.status == "completed", out.error
    primary, fallback = (r.body for r in world.server.requests[2:])
    assert (primary["model"], fallback["model"]) == ("m1", "s1")
    # the primary takes tools: the earlier exchange goes back as a call and its result
    assert any(m.get("tool_calls") for m in primary["messages"])
    assert any(m["role"] == "tool" for m in primary["messages"])
    # the fallback has no tools: neither the call nor the result, the chat text all there
    assert "tools" not in fallback
    assert not any(m.get("tool_calls") for m in fallback["messages"])
    assert not any(m["role"] == "tool" for m in fallback["messages"])
    texts = [m.get("content") for m in fallback["messages"]]
    assert "Roll for me" in texts and "You rolled a four." in texts and "Again?" in texts


async def _long_chat(world: World, chat_id: str, pairs: int) -> list[str]:
    """``pairs`` user/character exchanges and a last user message; their texts, oldest
    first."""
    texts: list[str] = []
    for _ in range(pairs):
        for is_user, name in ((True, "Ada"), (False, "Mira")):
            text = f"Message {len(texts)}: " + "the water is calm and grey. " * 12
            texts.append(text.strip())
            await world.tk.store.append_message(
                chat_id, Message.new(name, texts[-1], is_user=is_user), owner=world.tk.owner
            )
    texts.append("Last: are we there yet?")
    await world.tk.store.append_message(
        chat_id, Message.new("Ada", texts[-1], is_user=True), owner=world.tk.owner
    )
    return texts


async def _depth_lore(world: World) -> None:
    """A constant lorebook entry at depth 99 (the top of the history), as a user message."""
    entry = {
        "uid": 0,
        "key": [],
        "keysecondary": [],
        "comment": "Bell",
        "content": LORE,
        "constant": True,
        "selective": False,
        "order": 100,
        "position": 4,
        "depth": 99,
        "role": 1,
        "disable": False,
    }
    book = json.dumps({"entries": {"0": entry}}).encode()
    await world.tk.library.import_bytes(book, source="bell.json")
    settings = await world.tk.settings()
    settings.world_info.global_books = ["bell"]
    await world.tk.store.put_settings(settings)


def _at(contents: list[str], text: str) -> int:
    return next((i for i, c in enumerate(contents) if text in c), -1)


@pytest.mark.parametrize("role", ["user", "assistant"])
async def test_a_smaller_fallback_window_trims_history_and_keeps_injections(
    world: World, role: str
) -> None:
    await _depth_lore(world)
    info = await world.chats.new_chat("Mira")
    texts = await _long_chat(world, info.id, pairs=4)
    await set_authors_note(
        world.tk.store,
        info.id,
        owner=world.tk.owner,
        text=NOTE,
        depth=99,
        interval=1,
        role=NOTE_ROLES[role],
        position=NOTE_POSITIONS["in_chat"],
    )
    preview = await world.chats.preview(info.id)
    request = preview.request
    assert isinstance(request, ChatPrompt)
    contents = [m.text() for m in request.messages]
    # both injections sit above the oldest chat message (one message when their roles
    # match, as SillyTavern joins a depth's prompts): a guess would trim them first
    assert 0 <= _at(contents, NOTE) < contents.index(texts[0])
    assert 0 <= _at(contents, LORE) < contents.index(texts[0])

    # A window for everything but chat history, plus the trigger and the two newest messages.
    counter = ByteEstimate()
    history = {*texts, GREETING}
    fixed = sum(message_tokens(m, counter) for m in request.messages if m.text() not in history)
    kept = sum(message_tokens(m, counter) for m in request.messages if m.text() in texts[-3:])
    await _fallback(world, context_window=RESERVE + fixed + kept + 2, max_output_tokens=RESERVE)
    world.server.script(
        Reply(status=500, error={"error": {"message": "down"}}), Reply(text="Nearly.")
    )
    out = await world.chats.send(info.id, "")
    assert out.status == "completed", out.error
    primary, fallback = (r.body for r in world.server.requests)
    assert [str(m.get("content")) for m in primary["messages"]] == contents
    sent = [str(m.get("content")) for m in fallback["messages"]]
    assert _at(sent, NOTE) >= 0 and _at(sent, LORE) >= 0
    assert [t for t in texts if t in sent] == texts[-3:]  # oldest history dropped first
    assert sent == [c for c in contents if c not in (GREETING, *texts[:-3])]


async def test_the_inspector_and_the_turn_read_the_same_labelled_request(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _depth_lore(world)
    info = await world.chats.new_chat("Mira")
    await _long_chat(world, info.id, pairs=1)
    seen: list[Any] = []
    real = turn_core.run_request

    async def spy(deps: Any, plan: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(call.request)
        return await real(deps, plan, call, *args, **kwargs)

    monkeypatch.setattr(turn_core, "run_request", spy)
    preview = await world.chats.preview(info.id)
    data = inspection(preview)
    world.server.script(Reply(text="Soon."))
    out = await world.chats.send(info.id, "")
    assert out.status == "completed", out.error

    (sent,) = seen
    assert isinstance(sent, ChatPrompt) and isinstance(preview.request, ChatPrompt)
    assert sent == preview.request
    assert [m.label for m in sent.messages] == [m.label for m in preview.request.messages]
    # the inspector's rows are the request's labels, and its wire body is what was sent
    rows = [(b["identifier"], b["source"], b["tokens"]) for b in data["blocks"]]
    labels = [m.label for m in sent.messages]
    assert all(label is not None for label in labels)
    assert rows == [(x.identifier, x.kind, x.tokens) for x in labels if x is not None]
    assert any(b["source"] == "injection" and b["content"] == LORE for b in data["blocks"])
    assert data["request"]["messages"] == world.server.requests[0].body["messages"]


async def test_a_smaller_text_fallback_trims_history_and_keeps_injections(world: World) -> None:
    """Text completion: the builder's pieces reach the attempt, so a smaller fallback window
    drops the oldest chat messages and keeps the author's note (without them the prompt is
    one fixed block, and the fallback could only fail as too long)."""
    store = world.tk.store
    base = {"api": "text", "source": "openai", "base_url": world.server.base_url + "/v1"}
    await store.put(
        "connection_profile",
        ConnectionProfile.model_validate({**base, "name": "tg", "model": "t1"}).model_copy(
            update={"fallback_chain": "text-backup"}
        ),
    )
    await store.put(
        "fallback_chain", FallbackChain(name="text-backup", entries=[FallbackEntry(profile="tg2")])
    )
    settings = await world.tk.settings()
    settings.selections.profile = "tg"
    await store.put_settings(settings)
    info = await world.chats.new_chat("Mira")
    texts = await _long_chat(world, info.id, pairs=4)
    await set_authors_note(
        store,
        info.id,
        owner=world.tk.owner,
        text=NOTE,
        depth=99,
        interval=1,
        position=NOTE_POSITIONS["in_chat"],
    )
    preview = await world.chats.preview(info.id)
    request = preview.request
    assert isinstance(request, TextPrompt)
    assert request.prompt.index(NOTE) < request.prompt.index(texts[0])

    # a window for the fixed pieces, the trigger and the two newest chat messages
    prompt = TextTurnPrompt.from_text_prompt(request)
    counter = ByteEstimate()
    history = [b for b in prompt.blocks if b.history and not b.protected]
    fixed = sum(counter.count(b.text) for b in prompt.blocks if b not in history)
    newest = sum(counter.count(b.text) for b in history[-2:])
    window = RESERVE + counter.count(prompt.opening) + fixed + newest + 1
    await store.put(
        "connection_profile",
        ConnectionProfile.model_validate(
            {
                **base,
                "name": "tg2",
                "model": "t2",
                "capabilities": {"context_window": window, "max_output_tokens": RESERVE},
            }
        ),
    )
    world.server.script(
        Reply(status=500, error={"error": {"message": "down"}}), Reply(text=" Nearly.")
    )
    out = await world.chats.send(info.id, "")
    assert out.status == "completed", out.error
    primary, fallback = (str(r.body["prompt"]) for r in world.server.requests)
    assert primary == request.prompt
    assert NOTE in fallback and fallback.endswith(prompt.opening)
    assert [t for t in texts if t in fallback] == texts[-3:]
