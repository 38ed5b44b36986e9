"""Character, Card and Persona models: lossless round trips, defaults, convenience readers."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.errors import FormatError
from tavernkit.formats.png import read_text_chunks
from tavernkit.models.character import Card, Character, CharacterAsset, DepthPrompt
from tavernkit.models.persona import Persona, PersonaPosition, personas_from_st_settings


def _seraphina_chunks(folder: Path) -> dict[str, dict[str, Any]]:
    png = (folder / "default_Seraphina.png").read_bytes()
    return {c.keyword: json.loads(base64.b64decode(c.text)) for c in read_text_chunks(png)}


def test_seraphina_data_round_trips_with_key_order(st_default_data: Path) -> None:
    card_json = _seraphina_chunks(st_default_data)["chara"]
    character = Character.model_validate(card_json["data"])
    assert character.name == "Seraphina"
    assert character.character_book is not None
    assert len(character.character_book.entries) == 4
    wire = character.to_wire()
    assert wire == card_json["data"]
    assert json.dumps(wire) == json.dumps(card_json["data"])  # same key order


def test_seraphina_envelope_keeps_top_level_fields(st_default_data: Path) -> None:
    card_json = _seraphina_chunks(st_default_data)["ccv3"]
    card = Card.model_validate(card_json)
    assert card.spec == "chara_card_v3"
    assert card.spec_version == "3.0"
    assert card.character.name == "Seraphina"
    assert card.model_extra is not None
    assert card.model_extra["creatorcomment"].startswith("ST Default Bot")
    assert json.dumps(card.to_wire()) == json.dumps(card_json)


def test_seraphina_convenience_readers(st_default_data: Path) -> None:
    data = _seraphina_chunks(st_default_data)["chara"]["data"]
    character = Character.model_validate(data)
    assert character.world == "Eldoria"
    assert character.talkativeness == 0.5  # stored as the string "0.5"
    assert character.depth_prompt == DepthPrompt(prompt="", depth=4, role="system")


def test_create_writes_defaults_but_not_null_v3_fields() -> None:
    character = Character.create(name="Ada", description="An engineer.")
    wire = character.to_wire()
    assert wire["name"] == "Ada"
    assert wire["alternate_greetings"] == []
    assert wire["group_only_greetings"] == []
    assert wire["extensions"] == {}
    for absent in ("character_book", "assets", "nickname", "source", "creation_date"):
        assert absent not in wire
    given_v3 = Character.create(name="Ada", nickname="A", creation_date=1700000000)
    assert given_v3.to_wire()["nickname"] == "A"
    assert given_v3.to_wire()["creation_date"] == 1700000000


def test_card_create_has_no_null_spec() -> None:
    card = Card.create(data=Character.create(name="Ada"))
    assert "spec" not in card.to_wire()
    assert card.to_wire()["data"]["name"] == "Ada"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0.5", 0.5), (0.7, 0.7), (1, 1.0), ("abc", 0.5), (True, 0.5), (5, 0.5), (None, 0.5)],
)
def test_talkativeness_tolerates_strings_and_junk(raw: Any, expected: float) -> None:
    assert Character(extensions={"talkativeness": raw}).talkativeness == expected


def test_talkativeness_default_when_absent() -> None:
    assert Character().talkativeness == 0.5


def test_depth_prompt_malformed_is_none_but_kept() -> None:
    character = Character.model_validate({"name": "x", "extensions": {"depth_prompt": "oops"}})
    assert character.depth_prompt is None
    bad_depth = Character(extensions={"depth_prompt": {"prompt": "p", "depth": "deep"}})
    assert bad_depth.depth_prompt is None
    assert bad_depth.extensions["depth_prompt"]["depth"] == "deep"
    assert Character().depth_prompt is None


def test_world_empty_string_is_none() -> None:
    assert Character(extensions={"world": ""}).world is None
    assert Character(extensions={"world": "Eldoria"}).world == "Eldoria"


def test_tolerant_types_survive_round_trip() -> None:
    raw = {
        "name": "X",
        "creator_notes": None,
        "character_version": 2,
        "creation_date": 1700000000,
        "modification_date": 1700000000.5,
        "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png", "x": 1}],
        "creator_notes_multilingual": {"en": "hi"},
        "source": ["https://example.invalid/card"],
    }
    character = Character.model_validate(raw)
    assert character.assets is not None
    assert isinstance(character.assets[0], CharacterAsset)
    wire = character.to_wire()
    assert wire == raw
    assert isinstance(wire["character_version"], int)


def test_wrong_types_are_validation_errors() -> None:
    with pytest.raises(ValueError, match="alternate_greetings"):
        Character.model_validate({"name": "x", "alternate_greetings": "hello"})


_json_scalar = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_json = st.recursive(
    _json_scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_known = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=20),
        "description": st.text(max_size=40),
        "tags": st.lists(st.text(max_size=8), max_size=3),
        "extensions": st.dictionaries(st.text(max_size=8), _json, max_size=3),
        "character_version": st.text(max_size=5) | st.integers(),
        "nickname": st.none() | st.text(max_size=8),
    },
)


@settings(max_examples=60, deadline=None)
@given(known=_known, extra=st.dictionaries(st.text(min_size=1, max_size=8), _json, max_size=4))
def test_any_mapping_round_trips_in_order(known: dict[str, Any], extra: dict[str, Any]) -> None:
    mapping = dict(extra)
    mapping.update(known)
    items = list(mapping.items())
    items.reverse()  # an unusual key order must survive too
    raw = dict(items)
    wire = Character.model_validate(raw).to_wire()
    assert wire == raw
    assert list(wire) == list(raw)


# --- personas --------------------------------------------------------------------------------


def test_personas_from_settings() -> None:
    settings = {
        "power_user": {
            "personas": {"user-default.png": "User", "ada.png": "Ada"},
            "persona_descriptions": {
                "ada.png": {
                    "description": "An engineer.",
                    "position": 4,
                    "depth": 3,
                    "role": 1,
                    "lorebook": "Engines",
                    "title": "Countess",
                    "connections": [{"type": "character", "id": "x.png"}],
                },
                "deleted.png": {"description": "gone"},
                "user-default.png": {"description": "", "position": 0, "lorebook": ""},
            },
        }
    }
    personas = personas_from_st_settings(settings)
    assert [p.name for p in personas] == ["User", "Ada"]
    user, ada = personas
    assert user.avatar == "user-default.png"
    assert user.lorebook is None
    assert user.position == PersonaPosition.IN_PROMPT
    assert ada.position == PersonaPosition.AT_DEPTH
    assert (ada.depth, ada.role, ada.lorebook, ada.title) == (3, 1, "Engines", "Countess")
    assert ada.model_extra == {"connections": [{"type": "character", "id": "x.png"}]}


def test_personas_from_st_default_settings(st_default_data: Path) -> None:
    settings = json.loads((st_default_data / "settings.json").read_text(encoding="utf-8"))
    assert personas_from_st_settings(settings) == []


def test_persona_defaults() -> None:
    persona = Persona.create(name="P")
    assert (persona.position, persona.depth, persona.role, persona.lorebook) == (0, 2, 0, None)
    assert Persona.model_validate({"name": "P", "position": 7}).position == 7  # unknown kept


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"power_user": []}, "power_user"),
        ({"power_user": {"personas": ["a"]}}, "power_user.personas"),
        (
            {"power_user": {"personas": {}, "persona_descriptions": 3}},
            "power_user.persona_descriptions",
        ),
        (
            {"power_user": {"personas": {"a.png": "A"}, "persona_descriptions": {"a.png": 1}}},
            "power_user.persona_descriptions.a.png",
        ),
        (
            {
                "power_user": {
                    "personas": {"a.png": "A"},
                    "persona_descriptions": {"a.png": {"depth": "deep"}},
                }
            },
            "power_user.persona_descriptions.a.png.depth",
        ),
    ],
)
def test_personas_bad_settings(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(FormatError) as info:
        personas_from_st_settings(settings)
    assert info.value.field == field
    assert info.value.source == "settings.json"
