"""A streamed request's pieces (``send_streaming_request``) reach its ``on_delta`` in place:
the sink never blocks, so delivery calls it with no queue or worker task between."""

from __future__ import annotations

from tavernkit.context.request_data import _DeltaSink
from tavernkit.generation.delivery import Delivery
from tavernkit.providers.events import ReasoningDelta, TextDelta


async def test_delivery_hands_each_piece_over_before_send_returns() -> None:
    got: list[TextDelta | ReasoningDelta] = []
    delivery = Delivery(_DeltaSink(got.append))
    delivery.send(0, TextDelta("Hel"))
    assert got == [TextDelta("Hel")]  # no await in between: no worker task ran
    delivery.send(0, ReasoningDelta("hm"))
    delivery.send(0, TextDelta("lo"))
    assert got == [TextDelta("Hel"), ReasoningDelta("hm"), TextDelta("lo")]
    await delivery.drain()
    assert delivery.delivered(0) == "Hello" and delivery.text == "Hello"
