"""``continue_`` strips the model's echo of the text it continues, byte for byte, with the
turn runner's carried-text matcher: across chunk boundaries, streaming or not, for chat and
text-completion models; a near copy is the model's own text and is kept. On a chat-completion
API the preset's ``continue_postfix`` goes between the message and a continuation that does not
start with a space, as SillyTavern stores it (the cc_continue goldens' ``reply_in_chat``)."""

from __future__ import annotations

import pytest

from tavernkit.generation.sink import RecordingSink
from tavernkit.models.preset import ChatCompletionPreset

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
    # the continue postfix (a space) goes between, as SillyTavern stores a continued reply;
    # the user is shown it too, so what was shown is what is stored
    assert shown == " " + near + " Again."
    assert stored == PRIOR + shown


async def test_an_echo_is_stripped_for_a_text_completion_model(world: World) -> None:
    await use_profile(world, "textgen", api="text", model="tg-1")
    reply = Reply(text=PRIOR + " Sharp.", chunks=["The lamp", " is lit.", " Sharp."])
    shown, stored = await _continued(world, reply)
    assert shown == " Sharp."
    assert stored == PRIOR + " Sharp."


async def _continue_of(world: World, prior: str, continuation: str) -> str:
    """The stored reply after ``prior`` is continued with ``continuation``."""
    world.server.script(Reply(text=prior), Reply(text=continuation))
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    out = await world.chats.continue_(info.id)
    assert out.status == "completed", out.error
    return str((await world.chats.load(info.id)).messages[-1].data["mes"])


async def test_a_chat_completion_continuation_is_joined_by_the_postfix(world: World) -> None:
    # SillyTavern 1.18 (cc_continue): "The castle is" + "Fixed oracle reply." is stored with a
    # space between
    assert await _continue_of(world, "The castle is", "Fixed oracle reply.") == (
        "The castle is Fixed oracle reply."
    )


async def test_no_second_space_where_either_side_has_one(world: World) -> None:
    assert await _continue_of(world, "The castle is ", "safe.") == "The castle is safe."
    assert await _continue_of(world, "The castle is", " safe.") == "The castle is safe."


async def test_the_presets_postfix_is_used(world: World) -> None:
    preset = ChatCompletionPreset(name="lines", continue_postfix="\n")
    await world.tk.store.put("chat_preset", preset)
    settings = await world.tk.settings()
    settings.selections.chat_preset = "lines"
    await world.tk.store.put_settings(settings)
    assert await _continue_of(world, "The castle is", "safe.") == "The castle is\nsafe."


async def test_a_text_completion_continuation_has_no_postfix(world: World) -> None:
    # SillyTavern 1.18 (tc_continue): "The castle isFixed oracle reply."
    await use_profile(world, "textgen", api="text", model="tg-1")
    assert await _continue_of(world, "The castle is", "Fixed oracle reply.") == (
        "The castle isFixed oracle reply."
    )
