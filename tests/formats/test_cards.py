"""The card API: every format read, SillyTavern's card written back unchanged, bad input refused."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.cards import (
    CardSpec,
    card_to_charx,
    card_to_json,
    card_to_png,
    is_card,
    read_card,
    read_card_file,
    write_card_charx,
    write_card_json,
    write_card_png,
)
from tavernkit.formats.charx import write_charx
from tavernkit.formats.file_io import FormatLimits
from tavernkit.formats.png import (
    make_chunk,
    parse_chunks,
    placeholder_png,
    read_text_chunks,
    replace_text_chunks,
)
from tavernkit.models.character import Card, Character
from tavernkit.models.character_book import CharacterBook

V2_REQUIRED = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "alternate_greetings",
    "tags",
    "creator",
    "character_version",
    "extensions",
)


def _chunk_json(png: bytes) -> dict[str, tuple[str, dict[str, Any]]]:
    """keyword -> (the JSON text as written, parsed) of the card chunks."""
    out = {}
    for chunk in read_text_chunks(png, keywords=["chara", "ccv3"]):
        text = base64.b64decode(chunk.text).decode("utf-8")
        out[chunk.keyword] = (text, json.loads(text))
    return out


def _pixels(png: bytes) -> tuple[tuple[int, int], str, bytes]:
    with Image.open(io.BytesIO(png)) as image:
        return image.size, image.mode, image.tobytes()


def _png_card(obj: Any, keyword: str = "chara") -> bytes:
    text = base64.b64encode(json.dumps(obj).encode()).decode()
    return replace_text_chunks(placeholder_png(2, 2), [(keyword, text)])


def _v2(**data: Any) -> dict[str, Any]:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Ada", **data}}


# --- SillyTavern's default card ----------------------------------------------------------------


@pytest.fixture
def seraphina_png(st_default_data: Path) -> bytes:
    return (st_default_data / "default_Seraphina.png").read_bytes()


def test_read_seraphina(seraphina_png: bytes) -> None:
    imported = read_card(seraphina_png, source="default_Seraphina.png")
    assert imported.spec_found == "png"
    assert imported.card_spec == "v3"  # ccv3 is preferred
    character = imported.character
    assert character.name == "Seraphina"
    assert character.creator == "OtisAlejandro"
    assert character.world == "Eldoria"
    assert character.character_book is not None
    assert character.character_book.name == "Eldoria"
    assert len(character.character_book.entries) == 4
    assert imported.avatar == seraphina_png


def test_seraphina_png_round_trip_keeps_card_and_pixels(seraphina_png: bytes) -> None:
    imported = read_card(seraphina_png)
    out = card_to_png(imported.card, imported.avatar)
    before, after = _chunk_json(seraphina_png), _chunk_json(out)
    assert set(after) == {"chara", "ccv3"}
    for keyword in ("chara", "ccv3"):
        assert after[keyword][1] == before[keyword][1]
        assert list(after[keyword][1]) == list(before[keyword][1])  # key order
        assert list(after[keyword][1]["data"]) == list(before[keyword][1]["data"])
        assert after[keyword][0] == before[keyword][0]  # even the compact JSON text
    old_chunks, new_chunks = parse_chunks(seraphina_png).chunks, parse_chunks(out).chunks
    for kind in (b"IHDR", b"IDAT"):
        assert [c.raw for c in new_chunks if c.type == kind] == [
            c.raw for c in old_chunks if c.type == kind
        ]
    assert [c.type for c in new_chunks] == [b"IHDR", b"IDAT", b"tEXt", b"tEXt", b"IEND"]
    assert [c.keyword for c in read_text_chunks(out)] == ["chara", "ccv3"]
    assert _pixels(out) == _pixels(seraphina_png)


def test_seraphina_json_export_matches_the_chara_chunk(seraphina_png: bytes) -> None:
    card = read_card(seraphina_png).card
    chara = _chunk_json(seraphina_png)["chara"][1]
    v2 = card_to_json(card, spec="v2")
    assert json.dumps(v2) == json.dumps(chara)
    v3 = card_to_json(card, spec="v3")
    assert (v3["spec"], v3["spec_version"]) == ("chara_card_v3", "3.0")


def test_seraphina_file_round_trip(seraphina_png: bytes, tmp_path: Path) -> None:
    imported = read_card(seraphina_png)
    out = tmp_path / "out.png"
    write_card_png(imported.card, out, imported.avatar)
    again = read_card_file(out)
    assert again.card.to_wire() == imported.card.to_wire()
    charx = tmp_path / "out.charx"
    write_card_charx(imported.card, charx, avatar=imported.avatar)
    from_charx = read_card_file(charx)
    assert from_charx.avatar == seraphina_png
    assert from_charx.character.character_book == imported.character.character_book


def test_seraphina_v2_chunk_is_read_when_ccv3_is_absent(seraphina_png: bytes) -> None:
    only_v2 = replace_text_chunks(seraphina_png, [], remove=["ccv3"])
    imported = read_card(only_v2)
    assert imported.card_spec == "v2"
    assert imported.character.name == "Seraphina"


# --- reading each format -----------------------------------------------------------------------


def test_read_v2_json_tolerates_missing_optional_fields() -> None:
    imported = read_card(json.dumps(_v2(description="d")).encode(), source="ada.json")
    assert (imported.spec_found, imported.card_spec) == ("v2", "v2")
    assert imported.character.description == "d"
    written = card_to_json(imported.card)
    for key in V2_REQUIRED:
        assert key in written["data"]
    assert written["name"] == "Ada"
    assert written["creatorcomment"] == ""


def test_read_v3_json() -> None:
    card = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {"name": "Vee", "nickname": "V", "group_only_greetings": ["hi all"]},
    }
    imported = read_card(json.dumps(card).encode())
    assert imported.card_spec == "v3"
    assert imported.character.nickname == "V"
    assert imported.card.to_wire() == card


def test_read_v1_json_keeps_top_level_fields() -> None:
    v1 = {
        "name": "Old",
        "description": "desc",
        "personality": "p",
        "scenario": "s",
        "first_mes": "hello",
        "mes_example": "ex",
        "creatorcomment": "notes",
        "talkativeness": "0.8",
        "fav": True,
        "avatar": "none",
        "chat": "Old - 2023-1-1 @10h 00m 00s 000ms",
    }
    imported = read_card(json.dumps(v1).encode())
    assert (imported.spec_found, imported.card_spec) == ("v1", "v1")
    character = imported.character
    assert (character.first_mes, character.creator_notes) == ("hello", "notes")
    assert character.talkativeness == 0.8
    out = card_to_json(imported.card)
    assert out["spec"] == "chara_card_v2"
    assert out["chat"] == v1["chat"]
    assert out["fav"] is True
    assert all(key in out["data"] for key in V2_REQUIRED)
    reread = read_card(json.dumps(out).encode())
    assert reread.character.to_wire() == character.to_wire()


def test_read_pygmalion_json() -> None:
    pyg = {
        "char_name": "Pyg",
        "char_persona": "persona",
        "char_greeting": "greetings",
        "world_scenario": "a world",
        "example_dialogue": "<START>",
    }
    imported = read_card(json.dumps(pyg).encode())
    assert (imported.spec_found, imported.card_spec) == ("pygmalion", "v1")
    c = imported.character
    assert (c.name, c.description, c.first_mes, c.scenario, c.mes_example) == (
        "Pyg",
        "persona",
        "greetings",
        "a world",
        "<START>",
    )


def test_read_yaml() -> None:
    text = "name: Yam\ncontext: |\n  A yam.\ngreeting: Hello there\n"
    imported = read_card(text.encode())
    assert imported.spec_found == "yaml"
    assert (imported.character.name, imported.character.description) == ("Yam", "A yam.\n")
    assert imported.character.first_mes == "Hello there"


def test_read_charx_with_assets_and_extra_files() -> None:
    card = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Arc",
            "assets": [
                {
                    "type": "icon",
                    "uri": "embeded://assets/icon/images/main.png",
                    "name": "main",
                    "ext": "png",
                },
                {
                    "type": "emotion",
                    "uri": "__asset:assets/emotion/images/joy.webp",
                    "name": "joy",
                    "ext": "webp",
                },
                {
                    "type": "background",
                    "uri": "https://example.invalid/bg.png",
                    "name": "bg",
                    "ext": "png",
                },
            ],
        },
    }
    icon = placeholder_png(5, 5)
    files = {
        "assets/icon/images/main.png": icon,
        "assets/emotion/images/joy.webp": b"RIFF....WEBP",
        "module.risum": b"\x00\x01",
    }
    data = b"#!/bin/sh\nexit 0\n" + write_charx(card, files)  # a self-extracting stub
    imported = read_card(data, source="arc.charx")
    assert (imported.spec_found, imported.card_spec) == ("charx", "v3")
    assert imported.avatar == icon
    assert imported.assets == {
        "embeded://assets/icon/images/main.png": icon,
        "__asset:assets/emotion/images/joy.webp": b"RIFF....WEBP",
    }
    assert imported.extra_files == {"module.risum": b"\x00\x01"}
    written = card_to_charx(
        imported.card, imported.avatar, imported.assets, extra_files=imported.extra_files
    )
    again = read_card(written)
    assert again.assets == imported.assets  # embedded paths are kept, so the URIs are too
    assert again.extra_files == imported.extra_files
    before, after = imported.card.data.to_wire(), again.card.data.to_wire()
    assert {k: after[k] for k in before} == before  # the writer only adds required fields
    assert "group_only_greetings" in after


def test_charx_assets_without_embedded_uri_get_a_path() -> None:
    character = Character.create(
        name="New",
        assets=[{"type": "emotion", "uri": "joy", "name": "joy", "ext": "png"}],
    )
    avatar = placeholder_png(3, 3)
    imported = read_card(card_to_charx(character, avatar, {"joy": b"JOY"}))
    assert imported.avatar == avatar
    assert imported.assets == {
        "embeded://assets/emotion/images/joy.png": b"JOY",
        "embeded://assets/icon/images/main.png": avatar,
    }
    assert imported.character.assets is not None
    assert imported.character.assets[0].type == "icon"


def test_charx_with_v1_card_json_is_refused() -> None:
    data = write_charx({"spec": "chara_card_v2", "data": []}, {})
    with pytest.raises(FormatError) as info:
        read_card(data, source="x.charx")
    assert info.value.field == "card.json: data"


# --- detection ---------------------------------------------------------------------------------


def test_is_card() -> None:
    assert is_card(json.dumps(_v2()).encode())
    assert is_card(card_to_png(Character.create(name="P")))
    assert is_card(card_to_charx(Character.create(name="P")))
    assert is_card(b"name: Y\ngreeting: hi\n")
    assert not is_card(json.dumps({"name": "Eldoria", "entries": {}}).encode())  # a lorebook
    assert not is_card(json.dumps({"name": "Alpaca", "input_sequence": "###"}).encode())
    assert not is_card(b"[1, 2, 3]")
    assert not is_card(b"\x00\x01binary\xff")
    assert not is_card(placeholder_png())
    assert not is_card(b"just some words")


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("card", "field"),
    [
        ({**_v2(), "spec": "chara_card_v9"}, "spec"),
        ({**_v2(), "spec": 2}, "spec"),
        ({**_v2(), "spec_version": "3.0"}, "spec_version"),
        ({**_v2(), "spec_version": "two"}, "spec_version"),
        ({"spec": "chara_card_v3", "spec_version": "4.0", "data": {"name": "x"}}, "spec_version"),
        ({"spec": "chara_card_v2", "data": "text"}, "data"),
        ({"spec": "chara_card_v2"}, "data"),
        ({"spec": "chara_card_v2", "data": {"description": "no name"}}, "data.name"),
        (_v2(alternate_greetings="hello"), "data.alternate_greetings"),
        (_v2(tags=["ok", 3]), "data.tags[1]"),
        (_v2(character_book={"entries": [{"keys": "k"}]}), "data.character_book.entries[0].keys"),
        ({"name": "V1", "description": 5}, "description"),
        ({"char_name": "P", "char_persona": ["x"]}, "char_persona"),
        ({"title": "not a card"}, None),
    ],
)
def test_wrong_spec_or_types_name_the_field(card: dict[str, Any], field: str | None) -> None:
    with pytest.raises(FormatError) as info:
        read_card(json.dumps(card).encode(), source="bad.json")
    assert info.value.source == "bad.json"
    assert info.value.field == field


def test_png_field_errors_name_the_chunk() -> None:
    with pytest.raises(FormatError) as info:
        read_card(_png_card(_v2(tags="x"), "ccv3"), source="c.png")
    assert info.value.field == "tEXt 'ccv3': data.tags"


def test_png_without_card_chunk() -> None:
    with pytest.raises(FormatError, match="no character card") as info:
        read_card(placeholder_png(), source="plain.png")
    assert info.value.field == "chunk chara"


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ("not*base64", "base64"),
        (base64.b64encode(b"\xff\xfe{}").decode(), "UTF-8"),
        (base64.b64encode(b'{"spec": ').decode(), "invalid JSON"),
        (base64.b64encode(b"[1]").decode(), "JSON object"),
    ],
)
def test_png_bad_payload(payload: str, match: str) -> None:
    png = replace_text_chunks(placeholder_png(2, 2), [("chara", payload)])
    with pytest.raises(FormatError, match=match) as info:
        read_card(png, source="bad.png")
    assert (info.value.source, info.value.field) == ("bad.png", "tEXt 'chara'")


def test_broken_ccv3_is_an_error_even_with_a_good_chara() -> None:
    png = replace_text_chunks(_png_card(_v2()), [("ccv3", "%%%")])
    with pytest.raises(FormatError) as info:
        read_card(png)
    assert info.value.field == "tEXt 'ccv3'"


def test_truncated_png_card() -> None:
    png = card_to_png(Character.create(name="Cut"))
    for cut in (10, len(png) // 2, len(png) - 5):
        with pytest.raises(FormatError):
            read_card(png[:cut], source="cut.png")


def test_huge_text_field_hits_the_limit() -> None:
    limits = FormatLimits(text_field_chars=1000)
    card = _v2(description="x" * 2000)
    with pytest.raises(LimitExceeded) as info:
        read_card(json.dumps(card).encode(), limits=limits)
    assert info.value.field == "data.description"
    with pytest.raises(LimitExceeded) as info:
        read_card(_png_card(card, "chara"), limits=limits)
    assert info.value.field == "tEXt 'chara': data.description"


def test_fifty_megabyte_field_with_default_limits() -> None:
    card = _v2(first_mes="y" * (50 * 1024 * 1024))
    with pytest.raises(LimitExceeded):
        read_card(json.dumps(card).encode())


def test_card_json_byte_limit() -> None:
    data = json.dumps(_v2(description="x" * 500)).encode()
    with pytest.raises(LimitExceeded):
        read_card(data, limits=FormatLimits(card_json_bytes=100))
    with pytest.raises(LimitExceeded):
        read_card(_png_card(_v2(description="x" * 500)), limits=FormatLimits(card_json_bytes=100))


def test_bad_yaml() -> None:
    with pytest.raises(FormatError, match="YAML"):
        read_card(b"name: [unclosed\n")


def test_bad_utf8_text() -> None:
    with pytest.raises(FormatError, match="UTF-8"):
        read_card(b'{"name": "\xff"}')


def test_non_png_image_is_refused_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "card.png"
    with pytest.raises(FormatError):
        write_card_png(Character.create(name="J"), out, b"\xff\xd8\xff\xe0jpeg")
    assert list(tmp_path.iterdir()) == []


def test_card_with_broken_crc_chunk_elsewhere_still_reads() -> None:
    bad_time = bytearray(make_chunk(b"tIME", b"\x07\xe8\x01\x01\x00\x00\x00"))
    bad_time[-1] ^= 1
    png = _png_card(_v2())
    iend = png.rfind(b"IEND") - 4
    png = png[:iend] + bytes(bad_time) + png[iend:]
    assert read_card(png).character.name == "Ada"


# --- writing -----------------------------------------------------------------------------------


def test_new_card_json_has_st_layout(tmp_path: Path) -> None:
    character = Character.create(
        name="Nia", description="d", creator_notes="cn", tags=["t"], extensions={"fav": True}
    )
    out = card_to_json(character)
    assert list(out) == [
        "name",
        "description",
        "personality",
        "first_mes",
        "avatar",
        "mes_example",
        "scenario",
        "talkativeness",
        "fav",
        "creatorcomment",
        "spec",
        "spec_version",
        "data",
        "tags",
    ]
    assert (out["avatar"], out["talkativeness"], out["fav"]) == ("none", 0.5, True)
    assert (out["creatorcomment"], out["tags"]) == ("cn", ["t"])
    path = tmp_path / "nia.json"
    write_card_json(character, path, spec="v3")
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n    "name": "Nia"')
    assert json.loads(text)["spec"] == "chara_card_v3"
    assert read_card_file(path).card_spec == "v3"


def test_card_to_png_without_image_uses_a_valid_placeholder() -> None:
    png = card_to_png(Character.create(name="Img"))
    size, mode, _ = _pixels(png)
    assert size == (100, 150)
    assert mode == "RGB"
    assert read_card(png).character.name == "Img"


def test_unknown_write_spec() -> None:
    with pytest.raises(FormatError):
        card_to_json(Character.create(name="x"), spec="v4")  # type: ignore[arg-type]


# --- property tests: write -> read is identity --------------------------------------------------

_text = st.text(max_size=30)
_scalar = st.none() | st.booleans() | st.integers() | _text
_json = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_book = st.builds(
    lambda name, entries: CharacterBook.model_validate({"name": name, "entries": entries}),
    _text,
    st.lists(
        st.fixed_dictionaries(
            {"keys": st.lists(_text, max_size=3), "content": _text, "enabled": st.booleans()},
            optional={"extensions": st.dictionaries(_text, _json, max_size=2), "id": st.integers()},
        ),
        max_size=3,
    ),
)
_character = st.builds(
    Character.create,
    name=_text,
    description=_text,
    personality=_text,
    scenario=_text,
    first_mes=_text,
    mes_example=_text,
    creator_notes=_text,
    system_prompt=_text,
    post_history_instructions=_text,
    alternate_greetings=st.lists(_text, max_size=3),
    group_only_greetings=st.lists(_text, max_size=2),
    tags=st.lists(_text, max_size=3),
    creator=_text,
    character_version=_text,
    extensions=st.dictionaries(_text, _json, max_size=3),
    character_book=st.none() | _book,
    nickname=st.none() | _text,
    creation_date=st.none() | st.integers(min_value=0, max_value=2**40),
)


@settings(max_examples=40, deadline=None)
@given(_character, st.sampled_from(["v2", "v3"]))
def test_json_round_trip(character: Character, spec: CardSpec) -> None:
    out = card_to_json(character, spec=spec)
    back = read_card(json.dumps(out, ensure_ascii=False).encode())
    assert back.card_spec == spec
    assert back.character.to_wire() == character.to_wire()
    assert card_to_json(back.card, spec=spec) == out  # idempotent


@settings(max_examples=40, deadline=None)
@given(_character)
def test_png_round_trip(character: Character) -> None:
    image = placeholder_png(4, 6)
    png = card_to_png(character, image)
    back = read_card(png)
    assert back.character.to_wire() == character.to_wire()
    chunks = _chunk_json(png)
    assert chunks["chara"][1]["spec"] == "chara_card_v2"
    assert chunks["ccv3"][1]["spec"] == "chara_card_v3"
    assert card_to_png(back.card, back.avatar) == png  # rewriting is stable
    assert [c.raw for c in parse_chunks(png).chunks if c.type != b"tEXt"] == [
        c.raw for c in parse_chunks(image).chunks
    ]


@settings(max_examples=30, deadline=None)
@given(
    _character,
    st.none() | st.binary(min_size=1, max_size=64),
    st.dictionaries(st.sampled_from(["joy", "anger", "calm"]), st.binary(max_size=64), max_size=3),
)
def test_charx_round_trip(
    character: Character, avatar: bytes | None, emotions: dict[str, bytes]
) -> None:
    wire = character.to_wire()
    wire["assets"] = [{"type": "emotion", "uri": n, "name": n, "ext": "png"} for n in emotions]
    character = Character.model_validate(wire)
    data = card_to_charx(Card.create(data=character), avatar, emotions)
    back = read_card(data)
    assert back.avatar == avatar
    assert sorted(back.assets.values()) == sorted(
        [*emotions.values(), *([avatar] if avatar is not None else [])]
    )
    wire, expected = back.character.to_wire(), character.to_wire()
    wire.pop("assets")
    expected.pop("assets")
    assert wire == expected
    assert card_to_charx(back.card, back.avatar, back.assets) == data
