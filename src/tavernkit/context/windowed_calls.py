"""Background generations over the chat's newest messages, as a chat turn reads them.

A call (``generate_task`` and its stream, ``generate_raw``, ``generate_quiet_prompt``) runs on
task services whose state holds a window of the chat, and is redone on a larger window when
its build reads past it (:func:`~tavernkit.store.chat_window.windowed`): a call on a long
chat costs what it reads. Nothing such a call writes comes before its reads are done; the RNG
is rewound for a redo, so the redone build draws what a build over the whole chat would; a
stream that already sent events is never redone (they would go out twice).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tavernkit.errors import GenerateTaskError, OutsideWindow
from tavernkit.store.chat_window import windowed
from tavernkit.tasks.options import Emit, TaskEvent, TaskOptions, TaskResult, TaskStream
from tavernkit.tasks.run import TaskServices, run_task

__all__ = ["in_window", "task_stream_in_window"]

_T = TypeVar("_T")

#: the task services of one call: over a window of that many messages, or the whole chat
ServicesFor = Callable[[int | None], TaskServices]


async def in_window(
    chat_id: str | None,
    rng: random.Random,
    services: ServicesFor,
    run: Callable[[TaskServices], Awaitable[_T]],
    *,
    redo: Callable[[], bool] = lambda: True,
) -> _T:
    """``run`` on windowed services (see the module docstring); ``redo``: whether a build
    that read past its window may still be redone."""
    if chat_id is None:
        return await run(services(None))
    drawn = rng.getstate()

    async def attempt(window: int) -> _T:
        rng.setstate(drawn)
        try:
            return await run(services(window))
        except OutsideWindow as exc:
            if not redo():
                raise GenerateTaskError(
                    "unknown", "the task read past the chat it loaded after it began to stream"
                ) from exc
            raise

    return await windowed(chat_id, attempt)


def task_stream_in_window(
    chat_id: str | None, rng: random.Random, services: ServicesFor, task: TaskOptions
) -> TaskStream:
    """The task's event stream, run as :func:`in_window` runs a call until an event is out."""

    async def runner(emit: Emit) -> TaskResult:
        sent = False

        async def forward(event: TaskEvent) -> None:
            nonlocal sent
            sent = True
            await emit(event)

        return await in_window(
            chat_id, rng, services, lambda s: run_task(s, task, forward), redo=lambda: not sent
        )

    return TaskStream(runner)
