"""Many chats streaming at once in one process, through ChatService and one store, against a
scripted upstream on loopback: hundreds of turns (sends, swipes, continues, stops and
cancelled turns) with a short store throttle, so timed writes are often under way when a
stream ends. No turn may meet a StoreError, and every reply the store keeps is exactly what
its user was delivered. Bounded: 10 chats x 24 turns, a few seconds on a quiet machine."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tavernkit.chat import ChatService
from tavernkit.errors import StoreError
from tavernkit.generation.sink import RecordingSink

from ._server import HangingServer, Reply
from .conftest import StepClock, make_world

CHATS = 10
TURNS = 24


class PacedServer(HangingServer):
    """Every request gets a reply of its own (distinct words), streamed a frame at a time with
    a short pause, so the chats' streams interleave."""

    def __init__(self) -> None:
        super().__init__()
        self.counter: Iterator[int] = itertools.count()
        self.texts: list[str] = []

    def _next(self) -> Reply:
        n = next(self.counter)
        self.texts.append(" ".join(f"w{n}x{i}." for i in range(14)))
        return Reply(text=self.texts[-1], pace=0.002)


async def _wait_for_text(sink: RecordingSink) -> None:
    for _ in range(2500):
        if sink.text:
            return
        await asyncio.sleep(0.002)


async def _chat_loop(
    chats: ChatService, chat_id: str, seat: int, tally: dict[str, int], texts: list[str]
) -> None:
    for turn in range(TURNS):
        sink = RecordingSink()
        step = (turn + seat) % 8
        before = await chats.load(chat_id)
        if step == 3 and turn:
            verb = "continue"
            call = chats.continue_(chat_id, sink=sink)
        elif step == 5 and turn:
            verb = "swipe"
            call = chats.swipe(chat_id, sink=sink)
        else:
            verb = "send"
            call = chats.send(chat_id, f"message {turn} of seat {seat}", sink=sink)
        task = asyncio.create_task(call)
        if step in (6, 7):
            await _wait_for_text(sink)
            if step == 6:
                chats.stop(chat_id)
            else:
                task.cancel()  # a caller that went away mid-reply (a closed web request)
        try:
            out = await task
        except asyncio.CancelledError:
            tally["cancelled"] += 1
            stored = await chats.load(chat_id)
            last = stored.messages[-1]
            # what a crash leaves: the shown swipe is partial and holds delivered text only
            assert last.partial_swipes, (seat, turn)
            shown = last.data["mes"]
            assert any(text.startswith(shown) for text in texts), (seat, turn)
            # finish it, as a resumed session would, so the next turn starts from a clean reply
            await chats.edit(chat_id, len(stored.messages) - 1, shown or "...")
            continue
        tally[out.status] += 1
        assert out.status in ("completed", "aborted"), (seat, turn, out.error)
        stored = await chats.load(chat_id)
        last = stored.messages[-1]
        prefix = before.messages[-1].data["mes"] if verb == "continue" else ""
        # (a continued reply's outcome text is the whole message)
        assert last.data["mes"] == prefix + sink.text == out.text, (seat, turn, verb)
        # a stopped reply stays marked unfinished (kept as shown); a completed one is whole
        expected = 1 if out.status == "aborted" else 0
        assert len(last.partial_swipes) == expected, (seat, turn)


@pytest.mark.filterwarnings("error")
async def test_concurrent_chats_never_meet_a_store_error_and_keep_what_was_delivered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with PacedServer() as server:
        tk = await make_world(tmp_path / "home", server)
        try:
            # a throttle this short keeps the store sink's timer often mid-write at a stream's end
            chats = ChatService(tk.runtime, clock=StepClock(), stream_interval=0.01)
            infos = [await chats.new_chat("Mira") for _ in range(CHATS)]
            tally = {"completed": 0, "aborted": 0, "failed": 0, "cancelled": 0}
            results = await asyncio.gather(
                *(
                    _chat_loop(chats, info.id, seat, tally, server.texts)
                    for seat, info in enumerate(infos)
                ),
                return_exceptions=True,
            )
            errors = [r for r in results if isinstance(r, BaseException)]
            assert not [e for e in errors if isinstance(e, StoreError)]
            if errors:
                raise errors[0]
            assert sum(tally.values()) == CHATS * TURNS
            assert tally["aborted"] and tally["cancelled"] and tally["completed"] > CHATS * 10
            # the store is still usable and every chat holds every turn's user message
            for seat, info in enumerate(infos):
                stored = await chats.load(info.id)
                sent = [m.data["mes"] for m in stored.messages if m.data.get("is_user")]
                assert all(f"of seat {seat}" in s for s in sent)
        finally:
            await tk.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
