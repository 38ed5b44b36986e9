"""Background generations on a long chat (``generate_task``, its stream, ``generate_raw``,
``generate_quiet_prompt``) read the chat's newest messages, not the whole chat: the state is
a window that grows only when the build reads past it (here: a world-info scan as deep as the
chat), and the redone build is the one a build over the whole chat makes, random draws
included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _chat_reads import ChatReads
from tavernkit.models.chat import Message
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.settings import Settings
from tavernkit.store import chat_window
from tavernkit.tasks.options import TaskDone

from ._helpers import context, profile, setup_tavern
from ._scripted_server import Reply, ScriptedServer

ASK = [{"role": "user", "content": "Pick {{pick::a::b::c::d::e::f}} and go on."}]


def _chat(n: int) -> list[Message]:
    messages = [Message.new("Mira", "Welcome to the lighthouse.", is_user=False)]
    for i in range(1, n):
        user = i % 2 == 1
        messages.append(Message.new("Ada" if user else "Mira", f"line {i}", is_user=user))
    return messages


def _book() -> Lorebook:
    book = Lorebook()
    book.new_entry(keys=["lighthouse"], content="LORE: the lamp is green.")
    for i in range(6):  # rolls of the context's RNG: a redone build must draw the same
        entry = book.new_entry(keys=["line"], content=f"LORE: maybe {i}.")
        entry.probability, entry.use_probability = 50, True
    return book


def _deep(settings: Settings) -> None:
    settings.world_info.depth = 1_000  # SillyTavern's most: the scan reaches the greeting


async def _sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, deep: bool) -> Any:
    """The requests on a 900-message chat, and the reads they made."""
    chat_window.windows.clear()
    async with ScriptedServer([Reply(text="ok")] * 4) as server:
        tk, chat_id = await setup_tavern(
            tmp_path,
            [profile(server.base_url + "/v1")],
            books={"World": _book()},
            chat=_chat(900),
            settings_edit=_deep if deep else None,
        )
        try:
            reads = ChatReads(monkeypatch, tk.store)
            result = await context(tk, chat_id).generate_task(
                ASK, world_info_source="chat", world_info_type="normal"
            )
            assert result.assistant_text == "ok"
            events = [
                e
                async for e in context(tk, chat_id).generate_task_stream(
                    ASK, world_info_source="chat", world_info_type="normal"
                )
            ]
            assert isinstance(events[-1], TaskDone)
            await context(tk, chat_id).generate_raw("Say ok.")
            await context(tk, chat_id).generate_quiet_prompt("Say ok.")
        finally:
            monkeypatch.undo()
            await tk.close()
    return [r.body["messages"] for r in server.requests], reads


async def test_a_shallow_task_reads_only_the_chats_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent, reads = await _sent(tmp_path, monkeypatch, deep=False)
    assert reads.whole == []
    # the tasks and generate_raw read the first window (and the greeting, its head); the
    # quiet prompt is a whole chat prompt: it grows as a chat turn's does, to what fits
    *tasks, _quiet_prompt = reads.rows
    assert tasks == [chat_window.FIRST_WINDOW + 1] * 4
    assert "lamp is green" not in str(sent[0])  # the greeting is beyond the scan's depth
    assert "line 899" in str(sent[3])  # the quiet prompt holds the chat's end


async def test_a_deep_read_grows_the_window_to_what_the_whole_chat_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent, reads = await _sent(tmp_path / "windowed", monkeypatch, deep=True)
    assert reads.whole == [] and max(reads.rows) > chat_window.FIRST_WINDOW + 1
    assert "LORE: the lamp is green." in str(sent[0]) and "LORE" in str(sent[1])
    # the same calls on the whole chat at once (a first window larger than the chat)
    monkeypatch.setattr(chat_window.windows, "first", 10**6)
    whole, _ = await _sent(tmp_path / "whole", monkeypatch, deep=True)
    assert sent == whole  # the same prompts, the same probability rolls
    assert "LORE: maybe" in str(sent)
