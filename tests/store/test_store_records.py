"""Document records: CRUD for every kind, names, owners, blobs, links, settings, variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tavernkit.errors import Conflict, FormatError, NotFound, StoreError
from tavernkit.models.character import Card
from tavernkit.models.lorebook import Lorebook
from tavernkit.models.profile import ConnectionProfile, CredentialRef
from tavernkit.models.settings import Settings
from tavernkit.store import KINDS, UNIQUE_NAME_KINDS, SqliteStore, Store, open_store
from tavernkit.store.sqlite import SHORT_LIST

CARD_V2: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Aria",
        "description": "A lighthouse keeper.",
        "first_mes": "The lamp is lit.",
        "extensions": {"talkativeness": "0.5", "world": "Coast"},
        "zz_vendor_field": [1, 2.5, None],
    },
    "name": "Aria",
    "avatar": "none",
}


def sample(kind: str, name: str) -> dict[str, Any]:
    """A record of ``kind`` that its real model accepts, with an unknown key where the format is
    open (the store must keep it)."""
    if kind == "character":
        return {**CARD_V2, "data": {**CARD_V2["data"], "name": name}, "name": name}
    if kind == "connection_profile":
        return {"name": name, "api": "chat", "source": "openai", "model": "gpt-x"}
    if kind == "fallback_chain":
        return {"name": name, "entries": [{"profile": "a"}, {"profile": "a", "model": "b"}]}
    if kind == "custom_endpoint":
        return {"name": name, "base_url": "http://127.0.0.1:5000/v1"}
    if kind == "chatluna_preset":
        return {"name": name, "keywords": ["k"], "prompts": [], "zz_unknown": {"nested": [1]}}
    if kind == "mcp_server":
        return {"name": name, "transport": "http", "url": "http://127.0.0.1/mcp"}
    return {"name": name, "zz_unknown": {"nested": [1, "two"]}, "temp": 0.7, "n": 100}


def wire(model: BaseModel) -> dict[str, Any]:
    to_wire = getattr(model, "to_wire", None)
    return to_wire() if callable(to_wire) else model.model_dump(mode="json", by_alias=True)


async def test_sqlite_store_implements_the_protocol(store: SqliteStore) -> None:
    as_protocol: Store = store  # mypy checks every signature against the protocol here
    assert isinstance(as_protocol, Store)


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_crud_for_every_kind(store: SqliteStore, kind: str) -> None:
    record = sample(kind, f"First {kind}")
    ref = await store.put(kind, record)
    assert ref.kind == kind and ref.name == f"First {kind}"

    got = await store.get(kind, ref.id)
    assert isinstance(got, store.models[kind])
    expected = wire(store.models[kind].model_validate(record))
    assert wire(got) == expected
    assert (await store.get(kind, ref.name)).model_dump() == got.model_dump()
    raw = await store.get_record(kind, ref.id)
    assert raw.data == record  # exactly what was put, unknown keys and all
    assert list(raw.data) == list(record)  # in the same key order

    infos = await store.list(kind)
    assert [(i.id, i.name, i.kind) for i in infos] == [(ref.id, ref.name, kind)]

    changed = sample(kind, f"Renamed {kind}")
    again = await store.put(kind, changed, id=ref.id)
    assert again.id == ref.id
    assert (await store.get_record(kind, ref.id)).data == changed
    [info] = await store.list(kind)
    assert info.name == f"Renamed {kind}" and info.updated > info.created

    await store.delete(kind, ref.id)
    assert await store.list(kind) == []
    with pytest.raises(NotFound):
        await store.get(kind, ref.id)
    with pytest.raises(NotFound):
        await store.delete(kind, ref.id)


async def test_models_are_accepted_as_well_as_mappings(store: SqliteStore) -> None:
    card = Card.model_validate(CARD_V2)
    ref = await store.put("character", card)
    assert ref.name == "Aria"  # from data.name
    assert (await store.get_record("character", ref.id)).data == CARD_V2

    profile = ConnectionProfile(name="Local", credentials=[CredentialRef(key_id="k1")])
    pref = await store.put("connection_profile", profile)
    assert await store.get("connection_profile", pref.id) == profile


async def test_names_are_unique_per_owner_and_kind(store: SqliteStore) -> None:
    await store.put("character", sample("character", "Aria"))
    with pytest.raises(Conflict):
        await store.put("character", sample("character", "Aria"))
    # Same name, other kind or other owner: fine.
    await store.put("lorebook", {"entries": {}}, name="Aria")
    await store.put("character", sample("character", "Aria"), owner="bob")
    # Renaming onto a taken name is refused too, and changes nothing.
    other = await store.put("character", sample("character", "Brio"))
    with pytest.raises(Conflict):
        await store.put("character", sample("character", "Aria"), id=other.id)
    assert (await store.get_record("character", other.id)).info.name == "Brio"


async def test_personas_may_share_a_name_but_a_name_lookup_must_be_unambiguous(
    store: SqliteStore,
) -> None:
    assert "persona" not in UNIQUE_NAME_KINDS
    a = await store.put("persona", {"name": "User", "avatar": "a.png"})
    b = await store.put("persona", {"name": "User", "avatar": "b.png"})
    assert a.id != b.id
    with pytest.raises(Conflict):
        await store.get("persona", "User")
    got = await store.get("persona", b.id)
    assert wire(got)["avatar"] == "b.png"


async def test_owners_never_see_each_other(store: SqliteStore) -> None:
    ref = await store.put("character", sample("character", "Aria"), owner="alice")
    assert await store.list("character", owner="bob") == []
    assert await store.list("character") == []  # the default owner is another owner
    with pytest.raises(NotFound):
        await store.get("character", ref.id, owner="bob")
    with pytest.raises(NotFound):
        await store.get("character", "Aria", owner="bob")
    with pytest.raises(NotFound):
        await store.delete("character", ref.id, owner="bob")
    with pytest.raises(NotFound):
        await store.get_blob("character", ref.id, owner="bob")
    # An id can not be taken over by another owner's put either.
    with pytest.raises(StoreError):
        await store.put("character", sample("character", "Mine"), owner="bob", id=ref.id)
    assert (await store.get_record("character", ref.id, owner="alice")).info.name == "Aria"


async def test_a_record_needs_a_name_and_a_known_kind(store: SqliteStore) -> None:
    with pytest.raises(StoreError, match="needs a name"):
        await store.put("lorebook", {"entries": {}})
    with pytest.raises(StoreError, match="unknown record kind"):
        await store.put("spaceship", {"name": "x"})
    with pytest.raises(StoreError, match="unknown record kind"):
        await store.list("spaceship")


async def test_invalid_mappings_are_refused_before_they_are_stored(store: SqliteStore) -> None:
    with pytest.raises(FormatError) as info:
        await store.put("connection_profile", {"name": "p", "api": 42})
    assert info.value.field == "api"
    with pytest.raises(FormatError):
        await store.put("character", {"name": "x", "zz": {1, 2}})  # a set is not JSON
    assert await store.list("connection_profile") == []


async def test_get_without_a_registered_model_raises_but_the_json_is_there(
    tmp_path: Path,
) -> None:
    async with await open_store(tmp_path / "bare.db", models={}) as bare:
        ref = await bare.put("instruct", {"name": "ChatML", "input_sequence": "<|im_start|>user"})
        with pytest.raises(StoreError, match="no model is registered"):
            await bare.get("instruct", ref.id)
        assert (await bare.get_record("instruct", "ChatML")).data["name"] == "ChatML"


async def test_avatar_blob_lives_with_the_character(store: SqliteStore) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    ref = await store.put("character", sample("character", "Aria"), blobs={"avatar": png})
    assert await store.get_blob("character", "Aria") == png
    assert await store.get_blob("character", ref.id, "background") is None
    # Replacing the record keeps blobs it does not name.
    await store.put("character", sample("character", "Aria"), id=ref.id)
    assert await store.get_blob("character", ref.id) == png
    await store.set_blob("character", ref.id, "avatar", b"new")
    assert await store.get_blob("character", ref.id) == b"new"
    await store.set_blob("character", ref.id, "avatar", None)
    assert await store.get_blob("character", ref.id) is None
    # Blobs never appear in a listing.
    [info] = await store.list("character")
    assert set(info.__slots__) == {"kind", "id", "name", "owner", "created", "updated"}


async def test_character_links_to_its_lorebooks_in_order(store: SqliteStore) -> None:
    char = await store.put("character", sample("character", "Aria"))
    coast = await store.put("lorebook", Lorebook.model_validate({"entries": {}}), name="Coast")
    sea = await store.put("lorebook", {"entries": {}}, name="Sea")
    await store.link("character", "Aria", "lorebook", "lorebook", sea.id)
    await store.link("character", char.id, "lorebook", "lorebook", "Coast")
    await store.link("character", char.id, "lorebook", "lorebook", "Coast")  # idempotent
    assert [i.id for i in await store.links("character", char.id, "lorebook")] == [
        sea.id,
        coast.id,
    ]
    await store.unlink("character", char.id, "lorebook", "lorebook", sea.id)
    assert [i.name for i in await store.links("character", "Aria", "lorebook")] == ["Coast"]
    await store.delete("lorebook", coast.id)
    assert await store.links("character", "Aria", "lorebook") == []
    with pytest.raises(NotFound):
        await store.link("character", "Aria", "lorebook", "lorebook", "Missing")


async def test_links_by_id_are_one_query_and_by_name_or_unknown_as_before(
    store: SqliteStore,
) -> None:
    char = await store.put("character", sample("character", "Aria"))
    for links in ([], ["Coast", "Sea"]):
        for name in links:
            await store.put("lorebook", {"entries": {}}, name=name)
            await store.link("character", char.id, "lorebook", "lorebook", name)
        async with store.trace() as stats:
            by_id = await store.links("character", char.id, "lorebook")
        assert stats.statements == 1  # the turn loader's read: no resolve first
        assert [i.name for i in by_id] == links
        assert await store.links("character", "Aria", "lorebook") == by_id
    with pytest.raises(NotFound):
        await store.links("character", "Nobody", "lorebook")
    await store.put("character", sample("character", "Bo"), owner="other")
    with pytest.raises(NotFound):  # another owner's id is no record of this one
        await store.links("character", char.id, "lorebook", owner="other")


async def test_settings_are_one_document_per_owner(store: SqliteStore) -> None:
    assert await store.get_settings() is None
    settings = Settings()
    await store.put_settings(settings)
    assert await store.get_settings() == settings
    assert await store.get_settings(owner="bob") is None
    data = settings.model_dump(mode="json", by_alias=True)
    await store.put_settings(data, owner="bob")
    assert await store.get_settings(owner="bob") == settings


async def test_global_variables_per_owner_keep_json_types(store: SqliteStore) -> None:
    await store.set_global_variable("count", 100)
    await store.set_global_variable("ratio", 0.5)
    await store.set_global_variable("tags", ["a", {"b": None}])
    await store.set_global_variable("count", 101)
    await store.set_global_variable("count", "other", owner="bob")
    got = await store.get_global_variables()
    assert got == {"count": 101, "ratio": 0.5, "tags": ["a", {"b": None}]}
    assert type(got["count"]) is int
    assert await store.get_global_variables(owner="bob") == {"count": "other"}
    await store.delete_global_variable("ratio")
    assert "ratio" not in await store.get_global_variables()
    with pytest.raises(FormatError):
        await store.set_global_variable("bad", object())


async def test_a_closed_store_says_so(store: SqliteStore) -> None:
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.list("character")
    await store.close()  # closing twice is harmless


@pytest.mark.parametrize("count", [3, SHORT_LIST, SHORT_LIST + 1, SHORT_LIST + 7])
async def test_a_list_is_whole_and_in_name_order_at_any_length(store: Store, count: int) -> None:
    """A list of up to ``SHORT_LIST`` rows is read on the caller's thread, a longer one again
    on the store's: either way every record is there, in name order, and only the owner's."""
    names = [f"Persona {i:03d}" for i in range(count)]
    for name in reversed(names):  # stored out of order: the list sorts them
        await store.put("persona", sample("persona", name))
    await store.put("persona", sample("persona", "Someone else's"), owner="other")
    assert [info.name for info in await store.list("persona")] == names
    assert [info.name for info in await store.list("persona", owner="other")] == ["Someone else's"]
