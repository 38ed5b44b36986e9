"""Delivery calls a sink's synchronous ``emit_nowait`` in place and queues for the others; both
paths deliver the same events in the same order, and a failing sink surfaces at drain()."""

from __future__ import annotations

import asyncio

import pytest

from tavernkit.generation.delivery import Delivery
from tavernkit.generation.sink import RecordingSink
from tavernkit.providers.events import TextDelta


async def _deliver(sink: RecordingSink, texts: list[str]) -> Delivery:
    delivery = Delivery(sink)
    for text in texts:
        delivery.send(0, TextDelta(text))
    await delivery.drain()
    await delivery.close()
    return delivery


async def test_inline_and_queued_delivery_agree() -> None:
    texts = ["The ", "tide ", "turns."]
    inline = RecordingSink()

    async def slow(_: object) -> None:
        await asyncio.sleep(0)

    queued = RecordingSink(before_emit=slow)
    assert inline.emit_nowait is not None and queued.emit_nowait is None
    a = await _deliver(inline, texts)
    b = await _deliver(queued, texts)
    assert inline.events == queued.events == [TextDelta(t) for t in texts]
    assert a.delivered(0) == b.delivered(0) == "The tide turns."


async def test_a_failing_inline_sink_surfaces_at_drain() -> None:
    class Broken(RecordingSink):
        @property
        def emit_nowait(self):  # type: ignore[override]
            def fail(event: object) -> None:
                raise RuntimeError("disk full")

            return fail

    delivery = Delivery(Broken())
    delivery.send(0, TextDelta("x"))
    with pytest.raises(RuntimeError, match="disk full"):
        await delivery.drain()
    assert delivery.delivered(0) == ""
