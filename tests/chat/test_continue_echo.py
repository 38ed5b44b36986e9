"""``continue_`` strips the model's echo of the text it continues, byte for byte, with the
turn runner's carried-text matcher: across chunk boundaries, streaming or not, for chat and
text-completion models; a near copy is the model's own text and is kept."""

from __future__ import annotations

import pytest

from tavernkit.generation.sink import RecordingSink

from ._server import Reply
from .conftest import World, use_profile

PRIOR = "The lamp is lit."


async def _continued(world: World, reply: Reply, *, stream: bool = True) -> tuple[str, str]:
    """(what the user was shown, the stored reply) of a continue answered with ``reply``."""
    world.server.script(Reply(text=PRIOR), reply)
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    sink = RecordingSink()
    out = await world.chats.continue_(info.id, sink=sink, stream=stream)
    assert out.status == "completed", out.error
    stored = await world.chats.load(info.id)
    last = stored.messages[-1]
    assert out.text == last.data["mes"] and last.data["swipes"] == [out.text]
    return sink.text, last.data["mes"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_an_echo_of_the_continued_text_is_stripped(world: World, stream: bool) -> None:
    # the echo ends mid-chunk and spans three chunks
    reply = Reply(
        text=PRIOR + " The fog rolls in.", chunks=["The la", "mp is l", "it. The fog", " rolls in."]
    )
    shown, stored = await _continued(world, reply, stream=stream)
    assert shown == " The fog rolls in."
    assert stored == PRIOR + " The fog rolls in."


async def test_a_near_copy_is_kept_whole(world: World) -> None:
    near = "The lamp is lit!"  # differs in its last byte: the model's own words
    shown, stored = await _continued(world, Reply(text=near + " Again."))
    assert shown == near + " Again."
    assert stored == PRIOR + near + " Again."


async def test_an_echo_is_stripped_for_a_text_completion_model(world: World) -> None:
    await use_profile(world, "textgen", api="text", model="tg-1")
    reply = Reply(text=PRIOR + " Sharp.", chunks=["The lamp", " is lit.", " Sharp."])
    shown, stored = await _continued(world, reply)
    assert shown == " Sharp."
    assert stored == PRIOR + " Sharp."
