"""What a first import promises: a broken JSON file is refused naming its line, column and
the character found there; a chat imported before its character is attached to it when the
character arrives, and importing the chat again does not make a second copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavernkit.errors import FormatError
from tavernkit.facade import Tavern
from tavernkit.plugins.json_syntax import json_syntax_error

CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Wren"}}
CHAT_LINES = [
    {"user_name": "Ada", "character_name": "unused", "chat_metadata": {}},
    {"name": "Wren", "is_user": False, "send_date": "June 19, 2023 2:20pm", "mes": "Hi"},
    {"name": "Ada", "is_user": True, "send_date": "June 19, 2023 2:21pm", "mes": "Hello"},
]
CHAT = "\n".join(json.dumps(line) for line in CHAT_LINES).encode()


@pytest.fixture
async def tk(tmp_path: Path):
    tavern = await Tavern(tmp_path / "home", load_plugins=False).open()
    try:
        yield tavern
    finally:
        await tavern.close()


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b'{"name": "Wren",}', "line 1, column 17: unexpected '}'"),
        (b'{"data": {"name": "Wren"\n  "tags": []}}', "line 2, column 3: unexpected '\"'"),
        (b'\xef\xbb\xbf{"talkativeness": tru}', "line 1, column 19: unexpected 't'"),
        (b'{"name": "Wren"', "line 1, column 16: the file ends too early"),
        (b'{"mes": "a"}\n{"mes": "b",}\n', "line 2, column 13: unexpected '}'"),
    ],
)
async def test_broken_json_is_refused_naming_line_column_and_character(
    tk: Tavern, data: bytes, said: str
) -> None:
    with pytest.raises(FormatError) as caught:
        await tk.library.import_bytes(data, source="wren.json")
    assert str(caught.value).startswith(f"wren.json: invalid JSON at {said}")


def test_what_is_not_json_is_not_blamed_on_json() -> None:
    assert json_syntax_error(b"\x89PNG\r\n", "card.png") is None
    assert json_syntax_error(b'{"a": 1}\n{"b": 2}\n', "chat.jsonl") is None
    assert json_syntax_error(b"plain words", "notes.txt") is None


async def test_a_chat_imported_before_its_character_is_attached_when_it_arrives(
    tk: Tavern,
) -> None:
    (first,) = await tk.library.import_bytes(CHAT, source="Wren - first.jsonl")
    assert first.status == "imported"
    assert (await tk.store.get_chat_info(first.id)).character_id is None

    results = await tk.library.import_bytes(json.dumps(CARD).encode(), source="wren.json")
    assert [(r.kind, r.status) for r in results] == [("character", "imported"), ("chat", "linked")]
    wren = (await tk.store.get_record("character", "Wren")).info.id
    assert (await tk.store.get_chat_info(first.id)).character_id == wren

    (again,) = await tk.library.import_bytes(CHAT, source="Wren - first.jsonl")
    assert (again.id, again.status) == (first.id, "unchanged")
    assert [c.id for c in await tk.store.list_chats()] == [first.id]


async def test_a_second_import_attaches_an_earlier_unattached_copy(tk: Tavern) -> None:
    """A chat stored unattached (before attaching on arrival existed) is the same chat when
    it is imported again for its character: attached, not copied."""
    (first,) = await tk.library.import_bytes(CHAT, source="Wren - first.jsonl")
    await tk.store.put("character", CARD)  # the card arrives without an import
    (again,) = await tk.library.import_bytes(CHAT, source="Wren - first.jsonl")
    assert (again.id, again.status) == (first.id, "linked")
    assert len(await tk.store.list_chats()) == 1
    wren = (await tk.store.get_record("character", "Wren")).info.id
    assert (await tk.store.get_chat_info(first.id)).character_id == wren


def test_the_cli_names_where_a_json_file_breaks(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tavernkit.cli import app

    broken = tmp_path / "wren.json"
    broken.write_bytes(b'{"name": "Wren",}')
    result = CliRunner().invoke(app, ["import", str(broken)])
    assert result.exit_code == 1
    assert "invalid JSON at line 1, column 17: unexpected '}'" in result.output
    assert "not a format tavernkit can import" not in result.output


async def test_a_group_chat_stays_its_groups_when_a_member_arrives(tk: Tavern) -> None:
    lines = [
        {"user_name": "Ada", "character_name": "unused", "chat_metadata": {}},
        {
            "name": "Wren",
            "is_user": False,
            "send_date": "June 19, 2023 2:20pm",
            "mes": "Hi",
            "original_avatar": "Wren.png",
        },
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    (group_chat,) = await tk.library.import_bytes(data, source="camp night.jsonl")
    results = await tk.library.import_bytes(json.dumps(CARD).encode(), source="wren.json")
    assert [r.kind for r in results] == ["character"]
    assert (await tk.store.get_chat_info(group_chat.id)).character_id is None
