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
finds no such run (404). Runs live in this process (as turns without Redis do); the answer
must reach the process that asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tavernkit.chat.script_host import ScriptOutcome
from tavernkit.errors import NotFound
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

    def __init__(self, run_id: str, owner: str, chat_id: str, timeout_s: float) -> None:
        self.id = run_id
        self.owner = owner
        self.chat_id = chat_id
        self.timeout_s = timeout_s
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
        await self.steps.put(step)
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            log.info("script run %s: question %d unanswered, cancelled", self.id, self.asked)
            return Answer(None)
        finally:
            self.waiting = None

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
    """This process's interactive script runs, by id."""

    def __init__(self, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._runs: dict[str, ScriptRun] = {}

    def start(
        self, owner: str, chat_id: str, work: Callable[[Asker], Awaitable[ScriptOutcome]]
    ) -> ScriptRun:
        """Start ``work`` (a script run given the run's asker) as a task."""
        run = ScriptRun(secrets.token_hex(16), owner, chat_id, self.timeout_s)
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

    def pending(self, owner: str, chat_id: str) -> list[dict[str, Any]]:
        """The questions ``owner``'s runs on ``chat_id`` wait on (their ``asking`` steps),
        oldest run first: what a reloaded chat screen asks again."""
        steps = (
            run.question()
            for run in self._runs.values()
            if run.owner == owner and run.chat_id == chat_id
        )
        return [step for step in steps if step is not None]

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
