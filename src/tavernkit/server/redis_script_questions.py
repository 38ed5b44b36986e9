"""Interactive script runs' questions across processes, in Redis
(:class:`~tavernkit.server.coordination.ScriptQuestions`).

A run stays in the process that started it (it is a task there, holding the script's state);
what the other processes need is its open question and a way to hand it the answer:

- each chat's open questions are one hash (``scriptq:<owner>:<chat>``, run id -> the owning
  process, the run's start and its ``asking`` step), written when a run asks and emptied when
  the question is answered, cancelled or timed out; the hash expires a while after the answer
  timeout, so nothing outlives the longest a question can wait;
- each process subscribes to a channel of its own (``scriptrun:<process>``, through the
  reconnecting :func:`~tavernkit.server.redis_coordination.subscribe_forever`). An answer
  taken by another process is published there; the owner answers it as its own route would
  (the run's next step or its typed error), stores that reply for a minute and publishes it
  to the asker's channel. The asker waits on its channel and every ``poll_s`` also reads the
  stored reply (a message lost while its subscription was down is not waited on forever).

Whether a process still runs is whether its channel has a subscriber (``PUBSUB NUMSUB``):
Redis drops a killed process's subscription when its connection closes, so the listing stops
showing a dead process's questions at once, and an answer to one, or one waiting on a
process that dies, is told the run ended (:class:`~tavernkit.errors.NotFound`) within
``gone_s`` (the time a live process may take to subscribe again after a Redis restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import redis.asyncio as aioredis

from tavernkit.errors import NotFound
from tavernkit.server.coordination import AnswerTaker, RelayedAnswer
from tavernkit.server.redis_coordination import _guard, _part, _text, _where, subscribe_forever

__all__ = ["RedisScriptQuestions"]

log = logging.getLogger(__name__)

#: how long a relayed answer's reply is kept for an asker that missed its message
_REPLY_KEEP_MS = 60_000


class RedisScriptQuestions:
    """:class:`~tavernkit.server.coordination.ScriptQuestions` in Redis (see the module
    docstring). ``keep_s``: how long a chat's hash of questions outlives its last write (more
    than the answer timeout)."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        keep_s: float,
        prefix: str = "tk:",
        poll_s: float = 2.0,
        gone_s: float = 3.0,
    ) -> None:
        self._redis = client
        self._where = _where(client)
        self._prefix = prefix
        self._keep_ms = max(1, int(keep_s * 1000))
        self._poll_s = poll_s
        self._gone_s = gone_s
        #: this process, as the other processes name it
        self.process = uuid.uuid4().hex
        #: relayed answers waiting for their reply, by request id
        self._replies: dict[str, asyncio.Future[RelayedAnswer]] = {}
        #: the relayed answers this process is taking (each waits for its run's next step)
        self._taking: set[asyncio.Task[None]] = set()

    def _chat_key(self, owner: str, chat_id: str) -> str:
        return f"{self._prefix}scriptq:{_part(owner)}:{_part(chat_id)}"

    def _channel(self, process: str) -> str:
        return f"{self._prefix}scriptrun:{process}"

    def _reply_key(self, request: str) -> str:
        return f"{self._prefix}scriptreply:{request}"

    async def open(
        self, owner: str, chat_id: str, run_id: str, started: float, step: Mapping[str, Any]
    ) -> None:
        entry = {"process": self.process, "started": started, "step": dict(step)}
        key = self._chat_key(owner, chat_id)
        async with _guard(self._where), self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, run_id, json.dumps(entry, ensure_ascii=False))
            pipe.pexpire(key, self._keep_ms)
            await pipe.execute()

    async def close(self, owner: str, chat_id: str, run_id: str) -> None:
        async with _guard(self._where):
            await self._redis.hdel(self._chat_key(owner, chat_id), run_id)

    async def listed(self, owner: str, chat_id: str) -> list[tuple[float, Mapping[str, Any]]]:
        async with _guard(self._where):
            raw = await self._redis.hgetall(self._chat_key(owner, chat_id))
        entries = [json.loads(_text(value)) for value in raw.values()]
        alive = await self._alive({entry["process"] for entry in entries})
        return [(e["started"], e["step"]) for e in entries if e["process"] in alive]

    async def _alive(self, processes: Iterable[str]) -> set[str]:
        """Which of ``processes`` are subscribed to their channel (still running)."""
        channels = {self._channel(process): process for process in processes}
        if not channels:
            return set()
        async with _guard(self._where):
            counts = await self._redis.pubsub_numsub(*channels)
        return {channels[_text(channel)] for channel, count in counts if int(count) > 0}

    async def forward(
        self, owner: str, chat_id: str, run_id: str, answer: Mapping[str, Any]
    ) -> RelayedAnswer:
        async with _guard(self._where):
            raw = await self._redis.hget(self._chat_key(owner, chat_id), run_id)
        if raw is None:
            raise NotFound(f"no script run {run_id!r} waits for an answer on this chat")
        process = json.loads(_text(raw))["process"]
        request = uuid.uuid4().hex
        reply = asyncio.get_running_loop().create_future()
        self._replies[request] = reply
        message = {
            "kind": "answer",
            "request": request,
            "reply_to": self.process,
            "owner": owner,
            "chat": chat_id,
            "run": run_id,
            "answer": dict(answer),
        }
        try:
            if not await self._publish(process, message):
                raise _ended(run_id)
            return await self._wait_reply(process, request, reply, run_id)
        finally:
            self._replies.pop(request, None)

    async def _publish(self, process: str, message: Mapping[str, Any]) -> bool:
        """Publish ``message`` to ``process``'s channel; false when no one received it
        within ``gone_s`` (the process stopped)."""
        data = json.dumps(message, ensure_ascii=False)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._gone_s
        while True:
            async with _guard(self._where):
                received = await self._redis.publish(self._channel(process), data)
            if received:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.25)  # a live process may be subscribing again

    async def _wait_reply(
        self, process: str, request: str, reply: asyncio.Future[RelayedAnswer], run_id: str
    ) -> RelayedAnswer:
        while True:
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(reply), self._poll_s)
            async with _guard(self._where):
                stored = await self._redis.get(self._reply_key(request))
            if stored is not None:
                return _relayed(json.loads(_text(stored)))
            if not await self._still_running(process):
                raise _ended(run_id)

    async def _still_running(self, process: str) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._gone_s
        while not await self._alive([process]):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.25)
        return True

    async def run(self, take: AnswerTaker, *, ready: asyncio.Event | None = None) -> None:
        try:
            await subscribe_forever(
                self._redis,
                self._channel(self.process),
                lambda data: self._received(take, data),
                ready=ready,
            )
        finally:
            for task in list(self._taking):
                task.cancel()

    def _received(self, take: AnswerTaker, data: str) -> None:
        try:
            message = json.loads(data)
            kind = message.get("kind")
        except (ValueError, AttributeError):  # not ours: the subscription goes on
            log.warning("a message on this process's script channel is not one of ours")
            return
        if kind == "reply":
            reply = self._replies.get(message.get("request"))
            if reply is not None and not reply.done():
                reply.set_result(_relayed(message))
        elif kind == "answer":
            task = asyncio.create_task(self._take(take, message))
            self._taking.add(task)
            task.add_done_callback(self._taking.discard)

    async def _take(self, take: AnswerTaker, message: Mapping[str, Any]) -> None:
        """Take a relayed answer (waiting for the run's next step) and send back the reply."""
        answered = await take(message["owner"], message["chat"], message["run"], message["answer"])
        reply = {
            "kind": "reply",
            "request": message["request"],
            "status": answered.status,
            "body": dict(answered.body),
            "headers": dict(answered.headers),
        }
        data = json.dumps(reply, ensure_ascii=False)
        try:
            async with _guard(self._where), self._redis.pipeline(transaction=False) as pipe:
                pipe.set(self._reply_key(message["request"]), data, px=_REPLY_KEEP_MS)
                pipe.publish(self._channel(message["reply_to"]), data)
                await pipe.execute()
        except Exception:  # the asker learns it from the missing reply and its poll
            log.warning("the reply to a relayed script answer could not be sent", exc_info=True)


def _relayed(reply: Mapping[str, Any]) -> RelayedAnswer:
    return RelayedAnswer(reply["status"], reply["body"], reply["headers"])


def _ended(run_id: str) -> NotFound:
    return NotFound(
        f"script run {run_id!r} has ended: the server process that ran it stopped "
        "(start the script again)"
    )
