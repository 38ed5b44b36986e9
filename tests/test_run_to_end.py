"""run_to_end: the work finishes even when its waiter is cancelled (twice, even), and the
waiter gets the cancellation only afterwards; the work's own result or error comes back."""

from __future__ import annotations

import asyncio

import pytest

from tavernkit.run_to_end import run_to_end


async def test_a_cancelled_waiter_lets_the_work_finish_first() -> None:
    steps: list[str] = []
    release = asyncio.Event()

    async def work() -> str:
        steps.append("started")
        await release.wait()
        steps.append("finished")
        return "done"

    waiter = asyncio.create_task(run_to_end(work()))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    waiter.cancel()  # a second cancellation is held back too
    await asyncio.sleep(0)
    assert not waiter.done() and steps == ["started"]
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert steps == ["started", "finished"]


async def test_the_works_result_and_error_come_back() -> None:
    async def ok() -> int:
        return 7

    async def boom() -> int:
        raise ValueError("bad")

    assert await run_to_end(ok()) == 7
    with pytest.raises(ValueError, match="bad"):
        await run_to_end(boom())


async def test_work_cancelled_by_its_owner_is_a_cancellation() -> None:
    task = asyncio.ensure_future(asyncio.sleep(10))
    asyncio.get_running_loop().call_soon(task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await run_to_end(task)
