"""Deleting a user (issue 34, finding 8): everything their owner has goes with them, or, by
the admin's choice, to another user, on both stores. Checked against every table the
database has (read from its catalog, so a table added later is checked too): no row of any
table mentions the deleted user's owner, id, records, chats, messages or keys, and no key
secret file is left; the other users' rows are untouched."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from store.test_store_usage import _recount
from tavernkit.errors import Conflict, NotFound, StoreError
from tavernkit.models.settings import Settings
from tavernkit.store import KeyState, SqliteStore, Store
from tavernkit.store.postgres import PostgresStore

CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Ava", "description": "a pilot", "first_mes": "Hi!"},
}


@dataclass
class Owned:
    """What one user was given: the strings no row may mention once they are deleted."""

    user_id: str
    owner: str
    ids: list[str] = field(default_factory=list)
    key_ids: list[str] = field(default_factory=list)

    def needles(self) -> list[str]:
        return [self.owner, self.user_id, *self.ids, *self.key_ids]


async def _populate(store: Store, name: str, *, book: str = "book") -> Owned:
    """One of everything the store keeps for a user: records with blobs and links, a chat
    with messages and swipes, an API key with its state, settings, a variable, vectors, an
    API token and a session."""
    assert isinstance(store, SqliteStore)
    owner = f"user:{name}-0001"
    user = await store.create_user(name, "$argon2id$h", owner=owner)
    made = Owned(user.id, owner)
    card = await store.put(
        "character", CARD, owner=owner, blobs={"avatar": f"PNG of {name}".encode()}
    )
    lore = await store.put("lorebook", {"name": book, "entries": {}}, owner=owner)
    await store.link("character", card.id, "lorebook", "lorebook", lore.id, owner=owner)
    persona = await store.put("persona", {"name": "Me", "description": name}, owner=owner)
    preset = await store.put("chat_preset", {"name": f"preset of {name}"}, owner=owner)
    made.ids += [card.id, lore.id, persona.id, preset.id]
    await store.put_settings(Settings(), owner=owner)
    await store.set_global_variable("score", 1, owner=owner)
    await store.set_global_variable(f"{name} only", 2, owner=owner)
    key = await store.add_api_key("openai", f"sk-secret-of-{name}", owner=owner, label="k")
    await store.put_key_state(KeyState(key, failures=1, uses=3), owner=owner)
    made.key_ids.append(key)
    chat = await store.create_chat(
        {"chat_metadata": {}},
        [{"name": "Ava", "is_user": False, "mes": f"diary of {name}", "swipes": ["a", "b"]}],
        name="c",
        owner=owner,
        character=card.id,
    )
    window = await store.load_chat(chat.id, owner=owner)
    made.ids += [chat.id, *(m.id for m in window.messages)]
    await store.add_vectors(
        f"chat:{chat.id}", "space", [(1, "memory", 0)], np.ones((1, 4), np.float32), owner=owner
    )
    await store.add_vectors(
        "world:book", "space", [(2, "entry", 0)], np.ones((1, 4), np.float32), owner=owner
    )
    token = await store.add_token(user.id, f"token-hash-{name}", label="bot")
    session = await store.create_session(
        user.id, f"session-hash-{name}", expires=datetime.now(UTC) + timedelta(days=1)
    )
    made.ids += [token.id, session.id]
    return made


async def _tables(store: Store) -> list[str]:
    assert isinstance(store, SqliteStore)
    if isinstance(store, PostgresStore):
        sql = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    async with store._read() as db:  # the store's own package's tests
        return sorted(str(r[0]) for r in await db.execute_fetchall(sql))


def _text(value: Any) -> str:
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("latin-1")
    return str(value)


async def _mentions(store: Store, needles: list[str]) -> dict[str, int]:
    """Per table, how many of its rows mention any of ``needles`` in any column."""
    assert isinstance(store, SqliteStore)
    counts: dict[str, int] = {}
    tables = await _tables(store)
    assert {"records", "chats", "messages", "api_keys", "memory_vectors", "users"} <= set(tables)
    async with store._read() as db:
        for table in tables:
            rows = await db.execute_fetchall(f"SELECT * FROM {table}")
            counts[table] = sum(
                1 for row in rows if any(n in _text(v) for v in row for n in needles)
            )
    return counts


async def _sealed_secrets(store: Store) -> set[str]:
    """The ids of the keys whose sealed secret the database holds."""
    assert isinstance(store, SqliteStore)
    async with store._read() as db:
        rows = await db.execute_fetchall("SELECT id FROM api_keys WHERE secret <> ''")
    return {str(r[0]) for r in rows}


async def test_deleting_a_user_deletes_everything_they_had(store: Store) -> None:
    assert isinstance(store, SqliteStore)
    ann = await _populate(store, "ann")
    bob = await _populate(store, "bob")
    bob_before = await _mentions(store, bob.needles())
    before = await _mentions(store, ann.needles())
    for table in ("records", "record_blobs", "record_links", "chats", "messages", "swipes"):
        assert before[table] > 0, table
    for table in ("api_keys", "key_state", "memory_vectors", "global_variables", "settings"):
        assert before[table] > 0, table
    for table in ("users", "api_tokens", "sessions"):
        assert before[table] > 0, table
    assert set(ann.key_ids) <= await _sealed_secrets(store)

    await store.delete_user(ann.user_id)

    after = await _mentions(store, ann.needles())
    assert {t: n for t, n in after.items() if n} == {}
    assert not set(ann.key_ids) & await _sealed_secrets(store)
    # bob's rows are all there, and still work
    assert await _mentions(store, bob.needles()) == bob_before
    assert await store.get_api_key_secret(bob.key_ids[0], owner=bob.owner) == "sk-secret-of-bob"
    assert [c.name for c in await store.list("character", owner=bob.owner)] == ["Ava"]
    assert await store.user_for_token("token-hash-bob") is not None
    with pytest.raises(NotFound):
        await store.get_user(ann.user_id)
    with pytest.raises(NotFound):
        await store.delete_user(ann.user_id)


async def test_handing_over_gives_the_records_to_another_user(store: Store) -> None:
    assert isinstance(store, SqliteStore)
    ann = await _populate(store, "ann", book="ann's book")
    carol = await _populate(store, "carol", book="carol's book")
    # carol has a character named Ava too: characters' names are unique per user
    await store.delete("character", "Ava", owner=carol.owner)

    await store.delete_user(ann.user_id, hand_over_to=carol.user_id)

    # nothing mentions ann's owner or account any more...
    gone = await _mentions(store, [ann.owner, ann.user_id, "token-hash-ann", "session-hash-ann"])
    assert {t: n for t, n in gone.items() if n} == {}
    # ...and what she had is carol's, whole: the card with its avatar and its lorebook link,
    # the chat with its messages, the key with its secret and state, the vectors
    card = (await store.get_record("character", "Ava", owner=carol.owner)).info
    assert await store.get_blob("character", card.id, "avatar", owner=carol.owner) == b"PNG of ann"
    links = await store.links("character", card.id, "lorebook", owner=carol.owner)
    assert [link.name for link in links] == ["ann's book"]
    chats = await store.list_chats(owner=carol.owner)
    assert len(chats) == 2
    ann_chat = next(c for c in chats if c.id in ann.ids)
    window = await store.load_chat(ann_chat.id, owner=carol.owner)
    assert window.messages[0].data["mes"] == "diary of ann"
    secret = await store.get_api_key_secret(ann.key_ids[0], owner=carol.owner)
    assert secret == "sk-secret-of-ann"
    assert (await store.get_key_state(ann.key_ids[0], owner=carol.owner)).uses == 3
    items, _ = await store.load_vectors(f"chat:{ann_chat.id}", "space", owner=carol.owner)
    assert [text for _, text, _ in items] == ["memory"]
    assert sorted(p.name for p in await store.list("persona", owner=carol.owner)) == ["Me", "Me"]
    # carol keeps her own variable of the same name, and gets ann's other one
    variables = await store.get_global_variables(owner=carol.owner)
    assert variables == {"score": 1, "carol only": 2, "ann only": 2}
    assert await store.user_for_token("token-hash-carol") is not None
    # carol's stored bytes now count what she was given, as a recount from the data says
    assert await store.storage_used(owner=carol.owner) == (await _recount(store))[carol.owner]


async def test_a_hand_over_with_clashing_names_changes_nothing(store: Store) -> None:
    assert isinstance(store, SqliteStore)
    ann = await _populate(store, "ann")
    bob = await _populate(store, "bob")  # a character Ava and a lorebook "book" too
    before = await _mentions(store, ann.needles())
    with pytest.raises(Conflict) as refused:
        await store.delete_user(ann.user_id, hand_over_to=bob.user_id)
    assert "character 'Ava'" in str(refused.value) and "lorebook 'book'" in str(refused.value)
    assert await _mentions(store, ann.needles()) == before
    assert (await store.get_user(ann.user_id)).owner == ann.owner
    with pytest.raises(NotFound):
        await store.delete_user(ann.user_id, hand_over_to="nobody")
    with pytest.raises(StoreError):
        await store.delete_user(ann.user_id, hand_over_to=ann.user_id)
    assert await _mentions(store, ann.needles()) == before
