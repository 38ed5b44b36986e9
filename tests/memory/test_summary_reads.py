"""The rolling summary reads a tail of the chat reaching back to the current summary, never
the whole chat: on a long chat that is summarized as it goes, ``Store.load_chat`` is never
called and the rows read do not grow with the chat; a chat with no summary yet is read back
to its start (the Raw builder summarizes from the first message), exactly as the pure rules
on the whole chat say."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from _chat_reads import ChatReads
from chat._server import HangingServer, Reply
from chat.conftest import make_world
from tavernkit.assist.summary import current_summary, set_summary, summarize
from tavernkit.facade import Tavern
from tavernkit.memory.summary import raw_summary_request, summary_task_prompt
from tavernkit.models.chat import Message
from tavernkit.text.tokens import ByteEstimateTokenizer


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[Tavern, HangingServer]]:
    async with HangingServer() as server:
        tk = await make_world(tmp_path / "home", server)
        settings = await tk.settings()
        summary = settings.memory.summary
        summary.source, summary.prompt_interval, summary.prompt_builder = "main", 10, 1
        summary.prompt = "Summarize."
        await tk.store.put_settings(settings)
        try:
            yield tk, server
        finally:
            await tk.close()


async def _long_chat(tk: Tavern, n: int) -> str:
    info = await tk.chats.new_chat("Mira")
    for i in range(n):
        user = i % 2 == 1
        await tk.store.append_message(
            info.id, Message.new("Ada" if user else "Mira", f"line {i}", is_user=user)
        )
    return info.id


async def test_a_summarized_long_chat_is_read_from_its_tail(
    site: tuple[Tavern, HangingServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    tk, server = site
    chat = await _long_chat(tk, 3_000)
    await set_summary(tk.runtime, chat, "Old summary.")
    for i in range(12):  # twelve messages since the summary: one is due
        await tk.store.append_message(chat, Message.new("Ada", f"new {i}", is_user=True))
    reads = ChatReads(monkeypatch, tk.store)
    assert await current_summary(tk.runtime, chat) == "Old summary."
    server.script(Reply(text="New summary."))
    update = await summarize(tk.context(chat))
    assert update is not None and update.text == "New summary."
    assert await current_summary(tk.runtime, chat) == "New summary."
    assert reads.whole == []
    # each read is a tail (the summary rules: 64; generate_raw's state: the turn's first
    # window, 160), never grown: the summary was within reach; the chat holds 3,013 messages
    assert max(reads.rows) <= 161
    # the request held what followed the old summary, the last message left out
    sent = server.requests[-1].body["messages"][1]["content"]
    assert sent.startswith("Old summary.\n\nAda:\nline 2999\n\nAda:\nnew 0") and "new 10" in sent
    assert "new 11" not in sent and "line 2998" not in sent
    # stored where the rules say, the position counted in the whole chat
    monkeypatch.undo()
    stored = await tk.store.load_chat(chat)
    assert Message.model_validate(stored.messages[update.message_index].data).extra.memory == (
        "New summary."
    )
    assert stored.messages[update.message_index].data["mes"] == "new 10"


async def test_a_chat_with_no_summary_is_summarized_from_its_start(
    site: tuple[Tavern, HangingServer],
) -> None:
    tk, server = site
    chat = await _long_chat(tk, 700)  # longer than the first two reads (64, 512)
    stored = await tk.store.load_chat(chat)
    whole = [Message.model_validate(m.data) for m in stored.messages]
    settings = (await tk.settings()).memory.summary
    state = await tk.context(chat).chat_state()
    expected = raw_summary_request(
        whole,
        settings,
        lambda text: text,
        count_tokens=ByteEstimateTokenizer().count,
        max_prompt_tokens=state.settings.prompt.max_context - state.settings.prompt.amount_gen,
    )
    assert expected is not None and summary_task_prompt(settings, lambda t: t) == "Summarize."
    server.script(Reply(text="From the start."))
    update = await summarize(tk.context(chat))
    assert update is not None and update.message_index == expected.last_used
    assert server.requests[-1].body["messages"][1]["content"] == expected.text
    assert expected.text.startswith("Mira:\n")  # the greeting: message 0
