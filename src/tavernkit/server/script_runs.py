"""Script runs that ask the user: ``/input``, ``/popup``, ``/buttons`` from the web UI.

A script started with ``"interactive": true`` (``POST /chats/{id}/script``, a quick reply's
click) runs as a task of its own. The request waits for the run's next *step*: either a
question (the run waits, its id and the question's number go to the browser) or its end (the
outcome, as a non-interactive run answers). The browser's answer
(``POST /chats/{id}/script/runs/{run}/answer``) wakes the run and waits, in turn, for the next
step. So no stream is needed, and a run outlives a dropped request: a page reloaded while a
question is open finds it again (``GET /chats/{id}/script/runs``: :meth:`ScriptRuns.pending`)
and answers it there. A question waits for an answer at most ``timeout_s`` (10 minutes unless
``serve --script-answer-timeout`` says otherwise), then it is cancelled as if the user pressed
Cancel, and the run goes on.

A run belongs to the owner and chat that started it: another user, or another chat's URL,
finds no such run (404). A run lives in the process that started it. With several processes
(``serve --redis``) its open question is also shared (:class:`~tavernkit.server.coordination.
ScriptQuestions`): any process lists it, and an answer any process takes is relayed to the
run's process, whose reply (the next step, or its typed error) the taking process answers.
When the run's process stops, its question leaves the listing and an answer to it is a 404
saying the run ended. The answer timeout counts the user's time on one question, not the
script's budget, wherever the answer comes from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.chat.script_host import ScriptOutcome
from tavernkit.errors import CoordinationError, NotFound, TavernKitError
from tavernkit.server.coordination import RelayedAnswer, ScriptQuestions
from tavernkit.server.errors import error_body, error_response
from tavernkit.stscript import Answer, Asker, Question

__all__ = ["ANSWER_TIMEOUT_S", "ScriptRun", "ScriptRuns"]

log = logging.getLogger(__name__)

#: how long a question waits for the user before it counts as cancelled
ANSWER_TIMEOUT_S = 600.0

#: a step: the JSON the route answers, or the error the run ended with
_Step = dict[str, Any] | BaseException


@dataclass(eq=False)
class _Waiting:
    number: int
    future: asyncio.Future[Answer]
    #: the ``asking`` step handed out for it (a reloaded page asks it again)
    step: dict[str, Any]


class ScriptRun:
    """One interactive run: who started it, where, and the steps not yet handed out."""

    def __init__(
        self,
        run_id: str,
        owner: str,
        chat_id: str,
        timeout_s: float,
        shared: ScriptQuestions | None = None,
    ) -> None:
        self.id = run_id
        self.owner = owner
        self.chat_id = chat_id
        self.timeout_s = timeout_s
        #: when it started (epoch seconds: the listing orders runs of every process by it)
        self.started = time.time()
        self._shared = shared
        self.steps: asyncio.Queue[_Step] = asyncio.Queue()
        self.waiting: _Waiting | None = None
        self.asked = 0
        self.task: asyncio.Task[None] | None = None

    async def ask(self, question: Question) -> Answer:
        """The run's :data:`~tavernkit.stscript.Asker`: hand the question out, wait for the
        answer (a cancel after ``timeout_s``)."""
        self.asked += 1
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        asked = {"id": self.asked, **question.to_json()}
        step = {"status": "asking", "run": self.id, "question": asked}
        self.waiting = _Waiting(self.asked, future, step)
        await self._share(step)
        await self.steps.put(step)
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            log.info("script run %s: question %d unanswered, cancelled", self.id, self.asked)
            return Answer(None)
        finally:
            self.waiting = None
            await self._share(None)

    async def _share(self, step: dict[str, Any] | None) -> None:
        """Tell the other processes the question is open (``step``) or closed. Redis
        unreachable: the question is still answered through this process, so the run goes
        on."""
        if self._shared is None:
            return
        try:
            if step is None:
                await self._shared.close(self.owner, self.chat_id, self.id)
            else:
                await self._shared.open(self.owner, self.chat_id, self.id, self.started, step)
        except CoordinationError as exc:
            log.warning("script run %s: its question is not shared: %s", self.id, exc)

    def answer(self, number: int, answer: Answer) -> None:
        """The user's answer to question ``number``; NotFound when that is not the one
        waiting (answered already, timed out, or never asked)."""
        waiting = self.waiting
        if waiting is None or waiting.number != number or waiting.future.done():
            raise NotFound(f"question {number} of this script is not waiting for an answer")
        # a request that left before it took this question (a reload) left it queued: the
        # answer's request must wait for the step after it, not get it again
        while not self.steps.empty():
            self.steps.get_nowait()
        waiting.future.set_result(answer)

    def question(self) -> dict[str, Any] | None:
        """The ``asking`` step of the question waiting for its answer, if one is."""
        waiting = self.waiting
        if waiting is None or waiting.future.done():
            return None
        return waiting.step


class ScriptRuns:
    """This process's interactive script runs, by id, and (``shared``: several processes)
    the other processes' open questions."""

    def __init__(
        self, timeout_s: float = ANSWER_TIMEOUT_S, shared: ScriptQuestions | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.shared = shared
        self._runs: dict[str, ScriptRun] = {}

    def start(
        self, owner: str, chat_id: str, work: Callable[[Asker], Awaitable[ScriptOutcome]]
    ) -> ScriptRun:
        """Start ``work`` (a script run given the run's asker) as a task."""
        run = ScriptRun(secrets.token_hex(16), owner, chat_id, self.timeout_s, self.shared)
        self._runs[run.id] = run

        async def main() -> None:
            step: _Step
            try:
                outcome = await work(run.ask)
                step = {"status": "done", **outcome.to_json()}
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the route raises it: a typed error reaches the client
                step = exc
            await run.steps.put(step)
            # nobody collects the end (the browser left): forget the run after a while
            asyncio.get_running_loop().call_later(self.timeout_s, self._forget, run.id)

        run.task = asyncio.create_task(main(), name=f"script-run-{run.id}")
        return run

    def find(self, owner: str, chat_id: str, run_id: str) -> ScriptRun:
        """The run ``run_id`` of ``owner`` on ``chat_id``; NotFound otherwise (another
        user's run is no different from none)."""
        run = self._runs.get(run_id)
        if run is None or run.owner != owner or run.chat_id != chat_id:
            raise NotFound(f"no script run {run_id!r} on this chat")
        return run

    async def pending(self, owner: str, chat_id: str) -> list[dict[str, Any]]:
        """The questions ``owner``'s runs on ``chat_id`` wait on (their ``asking`` steps),
        in this process and (``shared``) the others still running, oldest run first: what a
        reloaded chat screen asks again."""
        found: dict[str, tuple[float, Mapping[str, Any]]] = {}
        for run in self._runs.values():
            asking = run.question() if run.owner == owner and run.chat_id == chat_id else None
            if asking is not None:
                found[run.id] = (run.started, asking)
        if self.shared is not None:
            for started, step in await self.shared.listed(owner, chat_id):
                found.setdefault(str(step["run"]), (started, step))
        return [dict(step) for _, step in sorted(found.values(), key=lambda item: item[0])]

    async def answer(
        self, owner: str, chat_id: str, run_id: str, answer: Mapping[str, Any]
    ) -> dict[str, Any] | RelayedAnswer:
        """Give ``answer`` (the answer route's body) to the run and wait for its next step:
        a run of this process takes it here, another process's (``shared``) is relayed to
        it, and what that process answered comes back as a :class:`RelayedAnswer`."""
        if run_id in self._runs or self.shared is None:
            return await self.answer_here(owner, chat_id, run_id, answer)
        return await self.shared.forward(owner, chat_id, run_id, answer)

    async def answer_here(
        self, owner: str, chat_id: str, run_id: str, answer: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Answer a run of this process: its next step (NotFound: no such run, or not that
        question waiting; the run's own error when it failed)."""
        run = self.find(owner, chat_id, run_id)
        run.answer(
            int(answer["question"]),
            Answer(answer.get("button"), answer.get("text", ""), tuple(answer.get("chosen", ()))),
        )
        return await self.next_step(run)

    async def take_relayed(
        self, owner: str, chat_id: str, run_id: str, answer: Mapping[str, Any]
    ) -> RelayedAnswer:
        """An answer another process took for a run of this one: what the answer route
        here would have answered, as status, body and headers."""
        try:
            return RelayedAnswer(200, await self.answer_here(owner, chat_id, run_id, answer), {})
        except TavernKitError as exc:
            response = error_response(exc)
            headers = {
                name: value
                for name, value in response.headers.items()
                if name.lower() not in {"content-length", "content-type"}
            }
            return RelayedAnswer(response.status_code, json.loads(bytes(response.body)), headers)
        except Exception:
            log.exception("script run %s: a relayed answer failed", run_id)
            body = error_body("InternalError", "internal server error", code="internal")
            return RelayedAnswer(500, body, {})

    async def next_step(self, run: ScriptRun) -> dict[str, Any]:
        """Wait for the run's next question or its end (then the run is forgotten)."""
        step = await run.steps.get()
        if isinstance(step, BaseException):
            self._forget(run.id)
            raise step
        if step["status"] == "done":
            self._forget(run.id)
        return step

    def _forget(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    async def close(self) -> None:
        """Cancel the runs still going (the server stops)."""
        tasks = [run.task for run in self._runs.values() if run.task is not None]
        self._runs.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
