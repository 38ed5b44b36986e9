"""A chat stored without a character can be attached to one later (the import of a chat that
came before its character); a chat of another character is left alone."""

from __future__ import annotations

from tavernkit.store import Store


async def test_an_unattached_chat_is_attached_once(store: Store) -> None:
    aria = await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Aria"}})
    bram = await store.put("character", {"spec": "chara_card_v2", "data": {"name": "Bram"}})
    chat = await store.create_chat({"user_name": "Ada"}, [{"mes": "hi"}], name="Aria - 1")
    assert (await store.get_chat_info(chat.id)).character_id is None

    assert await store.attach_chat(chat.id, "Aria") is True
    info = await store.get_chat_info(chat.id)
    assert (info.character_id, info.character_name) == (aria.id, "Aria")
    assert [c.id for c in await store.list_chats(character=aria.id)] == [chat.id]
    # attached already: another character does not take it over
    assert await store.attach_chat(chat.id, bram.id) is False
    assert (await store.get_chat_info(chat.id)).character_id == aria.id
