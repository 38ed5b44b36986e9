"""Group files and group chats in and out: SillyTavern's own files (the three goldens that
carry ``st_group_file`` / ``st_group_chat_jsonl``) read, stored and written back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernkit.errors import FormatError, NotFound
from tavernkit.facade import Tavern
from tavernkit.formats.chats import chat_to_jsonl, read_chat_jsonl
from tavernkit.formats.groups import group_to_json, is_group_chat, is_group_file, read_group
from tavernkit.groups.records import load_group

from ._goldens import golden, with_files

FILE_CASES = with_files() or ["grp_cc_list"]


@pytest.mark.parametrize("case_id", FILE_CASES)
def test_group_file_reads_and_writes_back_as_sillytavern_wrote_it(case_id: str) -> None:
    original = golden(case_id)["st_group_file"]
    group = read_group(json.dumps(original, indent=4))
    written = group_to_json(group)
    assert json.loads(written) == original
    assert list(json.loads(written)) == list(original)  # key order kept
    assert written.decode() == json.dumps(original, indent=4, ensure_ascii=False)
    assert group.members == original["members"]


@pytest.mark.parametrize("case_id", FILE_CASES)
def test_group_chat_jsonl_round_trips_byte_for_byte(case_id: str) -> None:
    text = golden(case_id)["st_group_chat_jsonl"]
    chat = read_chat_jsonl(text.encode(), source=f"{case_id}.jsonl")
    assert is_group_chat(chat)
    assert chat_to_jsonl(chat) == text


def test_group_file_detection_and_typed_errors() -> None:
    assert is_group_file({"members": ["A.png"], "activation_strategy": 0, "chat_id": "x"})
    assert not is_group_file({"members": ["A.png"], "activation_strategy": 0})  # no group key
    assert not is_group_file({"name": "A", "first_mes": "hi"})
    with pytest.raises(FormatError) as err:
        read_group(b'{"members": "Alice.png", "activation_strategy": 0}', source="g.json")
    assert err.value.field == "members" and err.value.source == "g.json"
    with pytest.raises(FormatError, match="not a JSON group file"):
        read_group(b"{nope", source="g.json")


def test_numeric_ids_become_strings_and_missing_mutes_empty() -> None:
    group = read_group(
        '{"id": 1700000000000, "members": [], "activation_strategy": 1,'
        ' "chat_id": 17, "chats": [17], "disabled_members": null}'
    )
    assert (group.id, group.chat_id, group.chats, group.disabled_members) == (
        "1700000000000",
        "17",
        ["17"],
        [],
    )


async def _import_case(tk: Tavern, case: dict[str, Any]) -> None:
    for card in case["inputs"]["group"]["cards"]:
        await tk.library.import_bytes(json.dumps(card).encode(), source=card["avatar"])


@pytest.mark.parametrize("case_id", FILE_CASES)
async def test_library_imports_and_exports_a_group_with_its_chat(
    tmp_path: Path, case_id: str
) -> None:
    case = golden(case_id)
    group_file = json.dumps(case["st_group_file"], indent=4).encode()
    chat_text = case["st_group_chat_jsonl"]
    chat_id = case["st_group_file"]["chat_id"]
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await _import_case(tk, case)
        (imported,) = await tk.library.import_bytes(group_file, source=f"{case['id']}.json")
        assert (imported.kind, imported.status) == ("group", "imported")
        again = await tk.library.import_bytes(group_file, source=f"{case['id']}.json")
        assert again[0].status == "unchanged"
        # The chat file is named by its id; the group lists that id, so it attaches itself.
        (chat,) = await tk.library.import_bytes(chat_text.encode(), source=f"{chat_id}.jsonl")
        assert (chat.kind, chat.name) == ("chat", chat_id)
        info = await tk.store.get_chat_info(chat.id, owner=tk.owner)
        assert info.character_id is None  # a group chat belongs to no one character

        loaded = await load_group(tk.store, imported.name, owner=tk.owner)
        assert [m.name for m in loaded.members] == case["inputs"]["group"]["member_names"]
        assert loaded.missing == []
        assert loaded.group.chat_id == chat_id

        _, exported = await tk.library.export_bytes(imported.name, "json", kind="group")
        assert json.loads(exported) == case["st_group_file"]
        _, exported_chat = await tk.library.export_bytes(chat_id, "jsonl", kind="chat")
        assert exported_chat.decode() == chat_text


async def test_a_chat_imported_into_a_named_group_is_listed_there(tmp_path: Path) -> None:
    case = golden("grp_cc_list")
    group = dict(case["st_group_file"], chats=[], chat_id="")
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        await _import_case(tk, case)
        await tk.library.import_bytes(json.dumps(group).encode(), source="g.json")
        with pytest.raises(NotFound):
            await tk.library.import_bytes(
                case["st_group_chat_jsonl"].encode(), source="x.jsonl", group="No such group"
            )
        (chat,) = await tk.library.import_bytes(
            case["st_group_chat_jsonl"].encode(), source="camp night.jsonl", group=group["name"]
        )
        loaded = await load_group(tk.store, group["name"], owner=tk.owner)
        assert loaded.group.chats == ["camp night"] and loaded.group.chat_id == "camp night"
        assert chat.name == "camp night"


async def test_members_resolve_by_name_then_by_the_cards_own_avatar(tmp_path: Path) -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "avatar": "default_Seraphina.png",
        "data": {"name": "Seraphina", "first_mes": "Hello."},
    }
    plain = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Finn"}}
    group = {
        "id": "7",
        "name": "Glade",
        "members": ["default_Seraphina.png", "Finn.png", "Nobody.png"],
        "activation_strategy": 1,
        "chat_id": "",
        "chats": [],
    }
    async with Tavern(tmp_path / "home", load_plugins=False) as tk:
        for value in (card, plain, group):
            await tk.library.import_bytes(json.dumps(value).encode(), source="x.json")
        loaded = await load_group(tk.store, "Glade", owner=tk.owner)
        assert [(m.avatar, m.name) for m in loaded.members] == [
            ("default_Seraphina.png", "Seraphina"),
            ("Finn.png", "Finn"),
        ]
        assert loaded.missing == ["Nobody.png"]
        seraphina = await tk.store.get_record("character", "Seraphina", owner=tk.owner)
        assert loaded.character_ids["default_Seraphina.png"] == seraphina.info.id
