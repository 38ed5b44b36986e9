"""Images attached to a sent message reach the model: the chat-completion build inlines them
when the preset's ``media_inlining`` is on (SillyTavern's default), in the OpenAI shape; a
preset that turns it off sends the text alone; the stored message keeps the image either way."""

from __future__ import annotations

from tavernkit.models.preset import ChatCompletionPreset

from ._server import Reply
from .conftest import World

PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4Dw"
    "ABBAEAwS2OUAAAAABJRU5ErkJggg=="
)


async def _send_with_an_image(world: World) -> list[dict[str, object]]:
    world.server.script(Reply(text="A pixel."))
    info = await world.chats.new_chat("Mira")
    out = await world.chats.send(info.id, "What is this?", attachments=[PIXEL])
    assert out.status == "completed", out.error
    stored = (await world.chats.load(info.id)).messages[1].data["mes"]
    assert stored[1]["type"] == "image_url" and stored[1]["mime"] == "image/png"
    last = world.server.requests[-1].body["messages"][-1]
    assert last["role"] == "user"
    return last["content"] if isinstance(last["content"], list) else [last["content"]]


async def test_an_attached_image_is_sent_to_the_model(world: World) -> None:
    parts = await _send_with_an_image(world)
    assert parts[0] == {"type": "text", "text": "What is this?"}
    assert parts[1] == {"type": "image_url", "image_url": {"url": PIXEL}}


async def test_a_preset_without_media_inlining_sends_the_text(world: World) -> None:
    await world.tk.store.put(
        "chat_preset", ChatCompletionPreset(name="plain", media_inlining=False)
    )
    settings = await world.tk.settings()
    settings.selections.chat_preset = "plain"
    await world.tk.store.put_settings(settings)
    assert await _send_with_an_image(world) == ["What is this?"]
