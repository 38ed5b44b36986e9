"""``RedisScriptQuestions`` in one process, as two "processes" on one Redis: the listing shows
only questions of processes still subscribed, and a relayed answer whose reply message was
lost (the asker's subscription was down) still gets the reply, from the stored copy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import redis.asyncio

from tavernkit.errors import NotFound
from tavernkit.server.coordination import RelayedAnswer
from tavernkit.server.redis_coordination import redis_client
from tavernkit.server.redis_script_questions import RedisScriptQuestions

STEP = {"status": "asking", "run": "r1", "question": {"id": 1, "text": "Name?"}}


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    redis_ = redis_client(redis_url)
    try:
        yield redis_
    finally:
        await redis_.aclose()


@contextlib.asynccontextmanager
async def serving(questions: RedisScriptQuestions, replies: list[str]) -> AsyncIterator[None]:
    """``questions`` takes relayed answers (answering each with its text) while inside."""

    async def take(owner: str, chat: str, run: str, answer: Mapping[str, Any]) -> RelayedAnswer:
        replies.append(answer["text"])
        return RelayedAnswer(200, {"status": "done", "pipe": answer["text"]}, {})

    ready = asyncio.Event()
    task = asyncio.create_task(questions.run(take, ready=ready))
    await asyncio.wait_for(ready.wait(), 10)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_only_running_processes_questions_are_listed(client: redis.asyncio.Redis) -> None:
    owner, other = RedisScriptQuestions(client, keep_s=60), RedisScriptQuestions(client, keep_s=60)
    await owner.open("ann", "c-list", "r1", 1.0, STEP)
    assert await other.listed("ann", "c-list") == []  # the owner is not subscribed: gone
    async with serving(owner, []):
        assert await other.listed("ann", "c-list") == [(1.0, STEP)]
        assert await other.listed("bob", "c-list") == []
        await owner.close("ann", "c-list", "r1")
        assert await other.listed("ann", "c-list") == []


async def test_a_lost_reply_message_is_read_from_the_stored_copy(
    client: redis.asyncio.Redis,
) -> None:
    owner = RedisScriptQuestions(client, keep_s=60)
    # the asker never subscribes: the owner's reply message reaches no one
    asker = RedisScriptQuestions(client, keep_s=60, poll_s=0.2)
    await owner.open("ann", "c-lost", "r1", 1.0, STEP)
    taken: list[str] = []
    async with serving(owner, taken):
        reply = await asyncio.wait_for(
            asker.forward("ann", "c-lost", "r1", {"question": 1, "text": "Ada"}), 10
        )
    assert taken == ["Ada"]
    assert reply == RelayedAnswer(200, {"status": "done", "pipe": "Ada"}, {})


async def test_an_answer_to_no_such_run_or_a_stopped_process_is_not_found(
    client: redis.asyncio.Redis,
) -> None:
    owner = RedisScriptQuestions(client, keep_s=60)
    asker = RedisScriptQuestions(client, keep_s=60, gone_s=0.5)
    with pytest.raises(NotFound, match="no script run"):
        await asker.forward("ann", "c-gone", "r9", {"question": 1})
    await owner.open("ann", "c-gone", "r1", 1.0, STEP)  # and never subscribes
    with pytest.raises(NotFound, match="has ended"):
        await asyncio.wait_for(asker.forward("ann", "c-gone", "r1", {"question": 1}), 10)
