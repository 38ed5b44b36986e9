"""Memory in real chat turns: the Tavern's chat service, the SQLite store, the offline MiniLM
embedder (or a profile's /embeddings on the scripted server) and the scripted model."""

from __future__ import annotations

import hashlib

import pytest

from chat._server import Reply
from tavernkit.assist.summary import current_summary, set_summary
from tavernkit.errors import MemoryConfigError
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.profile import ConnectionProfile

from ._world import OLD_CHAT
from .conftest import MemoryWorld


async def _memory_on(world: MemoryWorld, **vectors: object) -> None:
    settings = await world.tk.settings()
    for key, value in vectors.items():
        setattr(settings.memory.vectors, key, value)
    await world.tk.store.put_settings(settings)


def _contents(messages: list[dict[str, object]]) -> list[str]:
    return [str(m.get("content")) for m in messages]


async def test_chat_memory_recalls_an_old_message_into_the_prompt(
    memory_world: MemoryWorld,
) -> None:
    world = memory_world
    await _memory_on(world, enabled_chats=True, protect=2, insert=1, query=1)
    chat_id = await world.chat_with(OLD_CHAT)
    world.server.script(Reply(text="Under the blue stone."))
    await world.tk.chats.send(chat_id, "Where did we hide the silver key?")
    contents = _contents(world.sent())
    recalled = "Past events:\nAda: We hid the silver key under the blue stone by the well."
    assert recalled in contents
    # moved, not copied: the history no longer holds it
    assert "We hid the silver key under the blue stone by the well." not in contents
    assert contents[-1] == "Where did we hide the silver key?"


async def test_memory_off_sends_the_chat_unchanged(memory_world: MemoryWorld) -> None:
    world = memory_world
    chat_id = await world.chat_with(OLD_CHAT)
    await world.tk.chats.send(chat_id, "Where did we hide the silver key?")
    contents = _contents(world.sent())
    assert "We hid the silver key under the blue stone by the well." in contents
    assert not any(c.startswith("Past events:") for c in contents)


async def test_chat_vectors_are_embedded_once_per_text(memory_world: MemoryWorld) -> None:
    world = memory_world
    await _memory_on(world, enabled_chats=True, protect=2, insert=1, query=1)
    chat_id = await world.chat_with(OLD_CHAT)
    spaces = world.tk.runtime.memory
    world.server.script(Reply(text="Under the stone."), Reply(text="It burns whale oil."))
    await world.tk.chats.send(chat_id, "Where did we hide the silver key?")
    collections = spaces.collections(world.tk.store, world.tk.runtime.owner, spaces.local())
    await world.tk.chats.memory.settle()
    first = collections.embedded
    # greeting + the old chat, the query, then (after the reply, in the background) the
    # user message and the reply
    assert first == 1 + len(OLD_CHAT) + 1 + 2
    await world.tk.chats.send(chat_id, "And the lantern?")
    await world.tk.chats.memory.settle()
    # the new query, the new user message and reply: nothing else is re-embedded
    assert collections.embedded - first == 3
    rows = await world.tk.store.load_vectors(f"chat:{chat_id}", spaces.local().name)
    assert len(rows[0]) == 1 + len(OLD_CHAT) + 4  # both turns' messages, once each


async def test_vectorized_entry_without_keys_activates_by_meaning(
    memory_world: MemoryWorld,
) -> None:
    world = memory_world
    book = Lorebook.model_validate(
        {
            "entries": {
                "0": {
                    "uid": 0,
                    "key": [],
                    "content": "Dragons fear the silver bells of the northern temple.",
                    "vectorized": True,
                    "position": 0,
                },
                "1": {
                    "uid": 1,
                    "key": [],
                    "content": "The baker sells honey bread at the market every morning.",
                    "vectorized": True,
                    "position": 0,
                },
                "2": {
                    "uid": 2,
                    "key": ["lantern"],
                    "content": "Lanterns burn whale oil.",
                    "position": 0,
                },
            }
        }
    )
    await world.tk.store.put("lorebook", book, name="Lore")
    settings = await world.tk.settings()
    settings.world_info.global_books = ["Lore"]
    settings.memory.vectors.enabled_world_info = True
    settings.memory.vectors.max_entries = 1
    settings.memory.vectors.score_threshold = 0.3
    await world.tk.store.put_settings(settings)
    chat_id = await world.chat_with([])
    await world.tk.chats.send(
        chat_id, "Are the dragons afraid of the temple bells? Bring a lantern."
    )
    text = "\n".join(_contents(world.sent()))
    assert "Dragons fear the silver bells of the northern temple." in text
    assert "honey bread" not in text
    assert "Lanterns burn whale oil." in text  # keyword activation is unchanged


def _bucket_vector(text: str) -> list[float]:
    vector = [0.0] * 16
    for word in text.lower().split():
        vector[hashlib.sha256(word.strip(".,?!").encode()).digest()[0] % 16] += 1.0
    return vector


async def test_profile_embeddings_endpoint_is_used(memory_world: MemoryWorld) -> None:
    world = memory_world
    world.server.embed = _bucket_vector
    profile = ConnectionProfile(
        name="embed",
        api="chat",
        source="openai",
        base_url=world.server.base_url + "/v1",
        model="embed-small",
    )
    await world.tk.store.put("connection_profile", profile)
    await _memory_on(world, enabled_chats=True, protect=2, insert=1, query=1,
                     embedder="profile:embed")  # fmt: skip
    chat_id = await world.chat_with(OLD_CHAT)
    await world.tk.chats.send(chat_id, "Where did we hide the silver key?")
    calls = [r for r in world.server.requests if r.path.endswith("/embeddings")]
    assert [c.body["model"] for c in calls] == ["embed-small", "embed-small"]
    assert calls[-1].body["input"] == ["Where did we hide the silver key?"]
    assert "We hid the silver key under the blue stone by the well." in calls[0].body["input"]


async def test_unknown_embedder_is_a_typed_error(memory_world: MemoryWorld) -> None:
    world = memory_world
    await _memory_on(world, enabled_chats=True, embedder="profile:nowhere")
    chat_id = await world.chat_with(OLD_CHAT)
    with pytest.raises(MemoryConfigError, match="no connection profile 'nowhere'"):
        await world.tk.chats.send(chat_id, "Hello")


async def test_rolling_summary_is_made_stored_injected_and_editable(
    memory_world: MemoryWorld,
) -> None:
    world = memory_world
    settings = await world.tk.settings()
    summary = settings.memory.summary
    summary.source, summary.prompt_interval, summary.prompt_builder = "main", 4, 1
    summary.prompt = "Summarize in {{words}} words."
    summary.prompt_words = 30
    await world.tk.store.put_settings(settings)
    chat_id = await world.chat_with(OLD_CHAT[:2])
    world.server.script(Reply(text="Fine."), Reply(text="Ada and Mira hid a key."), Reply("Ok."))
    await world.tk.chats.send(chat_id, "Let us go.")
    # greeting, 2 old, user, reply = 5 messages >= 4 since no summary: the summary request
    body = world.server.requests[-1].body
    assert body["messages"][0] == {"role": "system", "content": "Summarize in 30 words."}
    assert body["messages"][1]["content"].startswith("Mira:\nWelcome aboard, Ada.\n\nAda:\n")
    assert await current_summary(world.tk.runtime, chat_id) == "Ada and Mira hid a key."
    await world.tk.chats.send(chat_id, "Next?")
    assert "[Summary: Ada and Mira hid a key.]" in _contents(world.sent())
    await set_summary(world.tk.runtime, chat_id, "Edited: the key is under the stone.")
    await world.tk.chats.send(chat_id, "And now?")
    assert "[Summary: Edited: the key is under the stone.]" in _contents(world.sent())


async def test_deleting_a_chat_deletes_its_vectors(memory_world: MemoryWorld) -> None:
    world = memory_world
    await _memory_on(world, enabled_chats=True, protect=2, insert=1, query=1)
    chat_id = await world.chat_with(OLD_CHAT)
    await world.tk.chats.send(chat_id, "Where did we hide the silver key?")
    await world.tk.chats.memory.settle()
    space = world.tk.runtime.memory.local().name
    assert (await world.tk.store.load_vectors(f"chat:{chat_id}", space))[1] is not None
    await world.tk.store.delete_chat(chat_id)
    assert (await world.tk.store.load_vectors(f"chat:{chat_id}", space))[1] is None


async def test_a_failed_summary_never_fails_the_finished_turn(
    memory_world: MemoryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    world = memory_world
    settings = await world.tk.settings()
    settings.memory.summary.source, settings.memory.summary.prompt_interval = "main", 2
    settings.memory.summary.prompt_builder = 1
    await world.tk.store.put_settings(settings)
    chat_id = await world.chat_with([])
    world.server.script(Reply(text="Hello."), Reply(status=500, error={"error": "down"}))
    with caplog.at_level("WARNING", logger="tavernkit.facade"):
        out = await world.tk.chats.send(chat_id, "Hi.")
    assert out.status == "completed" and out.text == "Hello."
    assert any("summary of chat" in r.getMessage() for r in caplog.records)
    assert await current_summary(world.tk.runtime, chat_id) == ""
