"""A failed turn's partial reply stays marked partial, as a crash leaves it, with the error's
class and safe code on the swipe; :func:`incomplete_reply` reads both back, and a turn that
completes the reply clears them."""

from __future__ import annotations

from tavernkit.chat.incomplete import IncompleteReply, incomplete_reply
from tavernkit.generation.sink import RecordingSink

from ._server import Reply
from .conftest import World

CUT = Reply(text="The lamp is lit. The fog rolls in. Then the bell", break_after=8)


async def test_a_failed_turn_keeps_its_delivered_reply_partial_with_the_error(
    world: World,
) -> None:
    world.server.script(CUT, Reply(text="The rest."))
    info = await world.chats.new_chat("Mira")
    sink = RecordingSink()
    out = await world.chats.send(info.id, "Hello", sink=sink)
    assert out.status == "failed" and out.error is not None and sink.text
    stored = await world.chats.load(info.id)
    last = stored.messages[-1]
    # what a crash leaves: the delivered text, the swipe partial, no finish date
    assert last.data["mes"] == sink.text == out.text
    assert last.partial_swipes == (0,)
    assert last.data.get("gen_finished") is None
    record = {"error_class": out.error.error_class, "code": out.error.code}
    assert last.data["swipe_info"][0]["extra"]["extensions"]["turn_error"] == record
    assert incomplete_reply(last) == IncompleteReply(0, out.error.error_class, out.error.code)
    assert "incomplete (" in incomplete_reply(last).text()  # type: ignore[union-attr]

    # continuing it completes it: the mark and the error go
    done = await world.chats.continue_(info.id)
    assert done.status == "completed"
    last = (await world.chats.load(info.id)).messages[-1]
    assert last.data["mes"] == sink.text + "The rest."
    assert last.partial_swipes == ()
    assert incomplete_reply(last) is None
    assert "turn_error" not in last.data["swipe_info"][0]["extra"].get("extensions", {})
    assert "turn_error" not in last.data["extra"].get("extensions", {})


async def test_an_edit_finishes_an_unfinished_reply(world: World) -> None:
    world.server.script(CUT)
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "Hello")
    assert out.status == "failed" and out.message_index is not None
    await world.chats.edit(info.id, out.message_index, "The lamp is lit.")
    last = (await world.chats.load(info.id)).messages[-1]
    assert last.partial_swipes == () and incomplete_reply(last) is None
    assert "turn_error" not in last.data["swipe_info"][0]["extra"].get("extensions", {})
    assert "turn_error" not in last.data["extra"].get("extensions", {})


async def test_a_failed_swipe_marks_only_its_own_swipe(world: World) -> None:
    world.server.script(Reply(text="First."), CUT)
    info = await world.chats.new_chat("Mira")
    await world.chats.send(info.id, "Hello")
    out = await world.chats.swipe(info.id)
    assert out.status == "failed" and out.error is not None
    last = (await world.chats.load(info.id)).messages[-1]
    assert last.data["swipes"][0] == "First."
    assert last.partial_swipes == (1,)
    assert incomplete_reply(last, 0) is None
    assert incomplete_reply(last) == IncompleteReply(1, out.error.error_class, out.error.code)


async def test_a_reply_left_by_a_crash_is_incomplete_without_an_error(world: World) -> None:
    info = await world.chats.new_chat("Mira")
    stored = await world.tk.store.append_message(
        info.id, {"name": "Mira", "is_user": False, "mes": "", "swipes": [""], "swipe_id": 0}
    )
    # the streaming sink's write, and then the process died
    await world.tk.store.update_swipe_text(stored.id, 0, "Half a", complete=False)
    last = (await world.chats.load(info.id)).messages[-1]
    assert incomplete_reply(last) == IncompleteReply(0)
    assert incomplete_reply(last).text() == "incomplete (interrupted)"  # type: ignore[union-attr]
