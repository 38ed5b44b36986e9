"""Lorebook files: world-info round trips, card books both ways, foreign imports, bad input."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.file_io import FormatLimits
from tavernkit.formats.lorebooks import (
    character_book_to_lorebook,
    detect_lorebook_format,
    is_lorebook,
    lorebook_to_bytes,
    lorebook_to_character_book,
    lorebook_to_json,
    read_lorebook,
    read_lorebook_file,
    write_lorebook,
)
from tavernkit.models.character_book import CharacterBook
from tavernkit.models.lorebook import GENERATION_TYPE_TRIGGERS, Lorebook, entry_template

# World-info fields the card book carries (top level or under ``extensions``), so a book that
# goes WI -> card -> WI keeps them. ``addMemo`` is re-derived from the comment and the
# character filter is not converted, as in SillyTavern.
MAPPED_FIELDS = [
    "uid", "key", "keysecondary", "comment", "content", "constant", "selective", "order",
    "position", "disable", "excludeRecursion", "preventRecursion", "delayUntilRecursion",
    "displayIndex", "probability", "useProbability", "depth", "selectiveLogic", "outletName",
    "group", "groupOverride", "groupWeight", "scanDepth", "caseSensitive", "matchWholeWords",
    "useGroupScoring", "automationId", "role", "vectorized", "sticky", "cooldown", "delay",
    "matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
    "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes", "triggers", "ignoreBudget",
]  # fmt: skip

# The order of an entry SillyTavern's importers build: the template, then the keys it lacks.
IMPORTED_KEYS = [*entry_template(), "uid", "displayIndex"]


def _key_orders(value: Any) -> Any:
    if isinstance(value, dict):
        return [(k, _key_orders(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_key_orders(v) for v in value]
    return value


def _png_card(path: Path) -> dict[str, Any]:
    """The ``chara`` card of a PNG (a few lines here keep this test apart from the card code)."""
    data = path.read_bytes()
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt" and body.startswith(b"chara\0"):
            card: dict[str, Any] = json.loads(base64.b64decode(body[6:]))
            return card
        pos += 12 + length
    raise AssertionError("no chara chunk")


@pytest.fixture
def eldoria_raw(st_default_data: Path) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((st_default_data / "Eldoria.json").read_text("utf-8"))
    return raw


@pytest.fixture
def scenario_books(st_default_data: Path) -> list[tuple[str, dict[str, Any]]]:
    folder = st_default_data.parent.parent / "st-1.18" / "worldinfo"
    if not folder.is_dir():
        pytest.skip(f"no world-info scenarios at {folder}")
    books = []
    for path in sorted(folder.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        books.extend((f"{path.stem}/{b['name']}", b["data"]) for b in case["books"])
    return books


# --------------------------------------------------------------------------- world info


def test_eldoria_reads_and_writes_back_identically(
    st_default_data: Path, tmp_path: Path, eldoria_raw: dict[str, Any]
) -> None:
    book = read_lorebook_file(st_default_data / "Eldoria.json")
    assert book.name == "Eldoria"
    assert [e.comment for e in book.entries_in_order()] == [
        "eldoria",
        "shadowfang",
        "glade",
        "power",
    ]
    out = tmp_path / "Eldoria.json"
    write_lorebook(book, out)
    written = json.loads(out.read_text("utf-8"))
    assert written == eldoria_raw
    assert _key_orders(written) == _key_orders(eldoria_raw)
    assert "name" not in written  # the file name names the book; the file stays as it was
    # SillyTavern's own layout: JSON.stringify(data, null, 4), non-ASCII kept.
    original = (st_default_data / "Eldoria.json").read_text("utf-8")
    assert out.read_text("utf-8").strip() == original.strip()


# What a card book cannot hold comes back from it as SillyTavern's import defaults.
CARD_TRIP_NULL_DEFAULTS = {"role": 0, "useGroupScoring": False, "probability": 100,
                           "groupWeight": 100, "depth": 4}  # fmt: skip


def _after_card_trip(entry: dict[str, Any]) -> dict[str, Any]:
    """A field the entry lacks comes back as the template default (the card export writes
    SillyTavern's default for it under ``extensions``)."""
    out = {f: entry.get(f, entry_template().get(f)) for f in MAPPED_FIELDS}
    out |= {f: v for f, v in CARD_TRIP_NULL_DEFAULTS.items() if out[f] is None}
    return out


def test_scenario_books_round_trip_and_convert(
    scenario_books: list[tuple[str, dict[str, Any]]],
) -> None:
    """Every book of the recorded scenarios (real SillyTavern world-info JSON): written back
    unchanged, and WI -> card book -> WI keeps every mapped field."""
    for label, raw in scenario_books:
        book = read_lorebook(json.dumps(raw).encode(), source=label, name=label)
        again = json.loads(lorebook_to_bytes(book))
        assert _key_orders(again) == _key_orders(raw), label
        if len(raw["entries"]) > 200:
            continue  # the 2,000-entry perf books repeat one shape; converting them is slow
        card_book = lorebook_to_character_book(book)
        assert card_book.name == label and len(card_book.entries) == len(raw["entries"])
        back = lorebook_to_json(character_book_to_lorebook(card_book, character_name="X"))
        assert list(back["entries"]) == list(raw["entries"]), label
        for uid, entry in raw["entries"].items():
            got = back["entries"][uid]
            assert {f: got[f] for f in MAPPED_FIELDS} == _after_card_trip(entry), (label, uid)


def test_name_in_file_wins_and_is_kept() -> None:
    raw = {"entries": {}, "name": "Inner"}
    book = read_lorebook(raw, name="outer")
    assert book.name == "Inner" and lorebook_to_json(book) == raw
    assert read_lorebook({"entries": {}}, name="outer").name == "outer"


def test_stray_attribute_named_keys_survive() -> None:
    raw = {"entries": {"0": {"uid": 0, "keys": ["from a card"], "key": ["real"]}}}
    book = read_lorebook(raw)
    assert book.entries["0"].keys == ["real"]
    assert lorebook_to_json(book) == raw
    only_stray = {"entries": {"0": {"uid": 0, "secondary_keys": ["x"]}}}
    assert lorebook_to_json(read_lorebook(only_stray)) == only_stray


def test_entries_given_as_a_list_are_keyed_by_uid() -> None:
    raw = {"entries": [{"uid": 5, "key": ["a"]}, {"key": ["b"]}, {"uid": 2, "key": ["c"]}]}
    assert detect_lorebook_format(raw) == "sillytavern"
    book = read_lorebook(raw)
    assert list(book.entries) == ["1", "2", "5"]
    assert book.entries["1"].keys == ["b"]


@st.composite
def world_info_books(draw: st.DrawFn) -> dict[str, Any]:
    book = Lorebook()
    for _ in range(draw(st.integers(0, 4))):
        book.new_entry(
            keys=draw(st.lists(st.text(max_size=12), max_size=4)),
            secondary_keys=draw(st.lists(st.text(max_size=12), max_size=3)),
            comment=draw(st.text(max_size=20)),
            content=draw(st.text(max_size=80)),
            constant=draw(st.booleans()),
            vectorized=draw(st.booleans()),
            selective=draw(st.booleans()),
            selective_logic=draw(st.integers(0, 3)),
            order=draw(st.integers(-100, 1000) | st.floats(-1e6, 1e6)),
            position=draw(st.integers(0, 7)),
            disable=draw(st.booleans()),
            ignore_budget=draw(st.booleans()),
            exclude_recursion=draw(st.booleans()),
            prevent_recursion=draw(st.booleans()),
            delay_until_recursion=draw(st.booleans() | st.integers(0, 5)),
            match_persona_description=draw(st.booleans()),
            match_character_description=draw(st.booleans()),
            match_character_personality=draw(st.booleans()),
            match_character_depth_prompt=draw(st.booleans()),
            match_scenario=draw(st.booleans()),
            match_creator_notes=draw(st.booleans()),
            probability=draw(st.integers(0, 100)),
            use_probability=draw(st.booleans()),
            depth=draw(st.integers(0, 1000)),
            outlet_name=draw(st.text(max_size=8)),
            group=draw(st.text(max_size=8)),
            group_override=draw(st.booleans()),
            group_weight=draw(st.integers(1, 10000)),
            scan_depth=draw(st.none() | st.integers(0, 1000)),
            case_sensitive=draw(st.none() | st.booleans()),
            match_whole_words=draw(st.none() | st.booleans()),
            use_group_scoring=draw(st.booleans()),  # null becomes false in a card (see below)
            automation_id=draw(st.text(max_size=8)),
            role=draw(st.integers(0, 2)),  # null becomes 0 in a card
            sticky=draw(st.none() | st.integers(0, 20)),
            cooldown=draw(st.none() | st.integers(0, 20)),
            delay=draw(st.none() | st.integers(0, 20)),
            triggers=draw(st.lists(st.sampled_from(GENERATION_TYPE_TRIGGERS), unique=True)),
            display_index=draw(st.integers(0, 50)),
        )
    return lorebook_to_json(book)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=40)
@given(raw=world_info_books())
def test_write_then_read_is_identity(raw: dict[str, Any]) -> None:
    book = read_lorebook(raw)
    data = lorebook_to_bytes(book)
    again = read_lorebook(data)
    assert again == book
    assert _key_orders(lorebook_to_json(again)) == _key_orders(raw)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=40)
@given(raw=world_info_books(), name=st.text(min_size=1, max_size=10))
def test_world_info_to_card_book_and_back_keeps_mapped_fields(
    raw: dict[str, Any], name: str
) -> None:
    card_book = lorebook_to_character_book(read_lorebook(raw), name=name)
    card_json = json.loads(json.dumps(card_book.to_wire()))
    back = character_book_to_lorebook(CharacterBook.model_validate(card_json), character_name="C")
    assert back.name == name
    out = lorebook_to_json(back)
    assert list(out["entries"]) == list(raw["entries"])
    for uid, entry in raw["entries"].items():
        got = out["entries"][uid]
        assert {f: got[f] for f in MAPPED_FIELDS} == {f: entry[f] for f in MAPPED_FIELDS}
        assert got["addMemo"] is bool(entry["comment"])


# --------------------------------------------------------------------------- card books


def test_eldoria_exports_as_sillytavern_embedded_it(
    st_default_data: Path, eldoria_raw: dict[str, Any]
) -> None:
    """Seraphina's card holds the book SillyTavern made from Eldoria.json: every key it wrote
    has our value, in the same order (1.18 adds a few more keys, which may follow)."""
    embedded = _png_card(st_default_data / "default_Seraphina.png")["data"]["character_book"]
    ours = lorebook_to_character_book(read_lorebook(eldoria_raw, name="Eldoria")).to_wire()
    assert list(ours) == list(embedded) == ["entries", "name"]
    assert ours["name"] == "Eldoria"
    assert len(ours["entries"]) == len(embedded["entries"])
    for mine, theirs in zip(ours["entries"], embedded["entries"], strict=True):
        assert list(mine) == list(theirs)
        assert {k: mine[k] for k in theirs if k != "extensions"} == {
            k: v for k, v in theirs.items() if k != "extensions"
        }
        ext = mine["extensions"]
        assert [k for k in ext if k in theirs["extensions"]] == list(theirs["extensions"])
        assert {k: ext[k] for k in theirs["extensions"]} == theirs["extensions"]
        assert ext["triggers"] == [] and ext["outlet_name"] == "" and ext["ignore_budget"] is False


def test_seraphina_card_book_imports_like_sillytavern(
    st_default_data: Path, eldoria_raw: dict[str, Any]
) -> None:
    embedded = _png_card(st_default_data / "default_Seraphina.png")["data"]["character_book"]
    card_book = CharacterBook.model_validate(embedded)
    book = character_book_to_lorebook(card_book, character_name="Seraphina")
    assert book.name == "Eldoria"
    out = lorebook_to_json(book)
    assert list(out) == ["entries", "originalData"]
    assert out["originalData"] == embedded
    assert card_book.to_wire() == embedded  # the caller's book is not changed
    for uid, original in eldoria_raw["entries"].items():
        entry = out["entries"][uid]
        assert list(entry) == [*IMPORTED_KEYS, "extensions"]
        expected = {f: original[f] for f in MAPPED_FIELDS if f in original}
        # What the card cannot carry comes back as SillyTavern's import defaults.
        expected |= {"role": 0, "useGroupScoring": False}
        assert {f: entry[f] for f in expected} == expected
        assert entry["extensions"] == embedded["entries"][int(uid)]["extensions"]


def test_card_book_without_ids_or_name() -> None:
    card_book = CharacterBook.model_validate(
        {
            "entries": [
                {"keys": ["a"], "content": "A", "enabled": False, "insertion_order": 7},
                {"id": 9, "keys": ["b"], "content": "B", "position": "before_char"},
                {"keys": ["c"], "content": "C", "comment": "memo", "extensions": {"depth": 2}},
            ]
        }
    )
    book = character_book_to_lorebook(card_book, character_name="Ann")
    assert book.name == "Ann's Lorebook"
    out = lorebook_to_json(book)
    assert list(out["entries"]) == ["0", "2", "9"]
    a, b, c = out["entries"]["0"], out["entries"]["9"], out["entries"]["2"]
    assert (a["uid"], a["disable"], a["order"], a["position"], a["addMemo"]) == (
        0,
        True,
        7,
        1,
        False,
    )
    assert (b["uid"], b["position"], b["displayIndex"], b["disable"]) == (9, 0, 1, True)
    assert (c["depth"], c["comment"], c["addMemo"], c["extensions"]) == (
        2,
        "memo",
        True,
        {"depth": 2},
    )
    assert "content" in a and "key" in a
    # The kept original gains the ids SillyTavern writes into it, appended last.
    assert [list(e)[-1] for e in out["originalData"]["entries"]] == ["id", "position", "id"]
    assert [e["id"] for e in out["originalData"]["entries"]] == [0, 9, 2]


def test_card_book_read_directly_and_as_lorebook_v3() -> None:
    card_book = {"name": "Direct", "entries": [{"keys": ["k"], "content": "v", "id": 3}]}
    assert detect_lorebook_format(card_book) == "character_book"
    book = read_lorebook(card_book, name="file")
    assert book.name == "Direct" and book.entries["3"].content == "v"
    wrapped = {"spec": "lorebook_v3", "data": {"entries": [{"keys": ["x"], "content": "y"}]}}
    assert detect_lorebook_format(wrapped) == "lorebook_v3"
    book = read_lorebook(wrapped, name="file")
    assert book.name == "file" and book.entries["0"].keys == ["x"]


def test_world_info_to_card_book_leaves_out_what_the_file_lacks() -> None:
    book = read_lorebook({"entries": {"1": {"uid": 1, "key": ["k"], "content": "c"}}}, name="B")
    entry = lorebook_to_character_book(book).to_wire()["entries"][0]
    assert list(entry) == [
        "id",
        "keys",
        "content",
        "enabled",
        "position",
        "use_regex",
        "extensions",
    ]
    assert entry["enabled"] is True and entry["position"] == "after_char"
    ext = entry["extensions"]
    assert "position" not in ext and "display_index" not in ext
    assert (ext["probability"], ext["useProbability"], ext["group_weight"]) == (None, False, None)
    assert (ext["depth"], ext["role"], ext["use_group_scoring"]) == (4, 0, False)


def test_entry_extensions_are_kept_under_the_mapped_keys() -> None:
    raw = {"entries": {"0": {"uid": 0, "position": 4, "extensions": {"mine": 1, "depth": 99}}}}
    ext = lorebook_to_character_book(read_lorebook(raw)).to_wire()["entries"][0]["extensions"]
    assert list(ext)[:2] == ["mine", "depth"] and ext["mine"] == 1 and ext["depth"] == 4
    assert ext["position"] == 4


# --------------------------------------------------------------------------- foreign books


def test_novelai_lorebook() -> None:
    raw = {
        "lorebookVersion": 5,
        "entries": [
            {
                "text": "The city of brass.",
                "contextConfig": {"budgetPriority": 400, "insertionPosition": -1},
                "displayName": "Brass City",
                "keys": ["brass", "city"],
                "enabled": True,
            },
            {"text": "Hidden.", "displayName": "  ", "keys": ["secret"], "enabled": False},
            {"text": "No flag.", "keys": []},
        ],
        "settings": {"orderByKeyLocations": False},
    }
    assert detect_lorebook_format(raw) == "novelai" and is_lorebook(json.dumps(raw))
    book = read_lorebook(json.dumps(raw).encode(), name="brass")
    assert book.name == "brass"
    out = lorebook_to_json(book)
    assert list(out) == ["entries"]
    first, second, third = (out["entries"][k] for k in ("0", "1", "2"))
    assert list(first) == IMPORTED_KEYS
    assert first["key"] == ["brass", "city"] and first["content"] == "The city of brass."
    assert (first["order"], first["comment"], first["addMemo"], first["disable"]) == (
        400, "Brass City", True, False,
    )  # fmt: skip
    assert (first["selective"], first["constant"], first["position"], first["depth"]) == (
        False, False, 0, 4,
    )  # fmt: skip
    assert first["delayUntilRecursion"] is False and first["displayIndex"] == 0
    assert (second["addMemo"], second["comment"], second["disable"], second["order"]) == (
        False, "  ", True, 0,
    )  # fmt: skip
    assert third["disable"] is True and third["comment"] == "" and third["addMemo"] is False


def test_agnai_memory_book() -> None:
    raw = {
        "kind": "memory",
        "name": "Agnai Book",
        "description": "",
        "entries": [
            {"name": "Sword", "entry": "A blade.", "keywords": ["sword"], "priority": 1,
             "weight": 5, "enabled": True},
            {"name": "", "entry": "Off.", "keywords": ["off"], "weight": 1, "enabled": False},
        ],
    }  # fmt: skip
    assert detect_lorebook_format(raw) == "agnai"
    book = read_lorebook(raw)
    assert book.name == "Agnai Book"
    assert read_lorebook(raw, name="file name").name == "file name"
    first, second = (lorebook_to_json(book)["entries"][k] for k in ("0", "1"))
    assert list(first) == IMPORTED_KEYS
    assert (first["key"], first["content"], first["comment"], first["order"]) == (
        ["sword"], "A blade.", "Sword", 5,
    )  # fmt: skip
    assert first["addMemo"] is True and first["disable"] is False
    assert second["addMemo"] is False and second["disable"] is True


def test_risu_lorebook() -> None:
    raw = {
        "type": "risu",
        "ver": 1,
        "data": [
            {"key": "ruby, red gem ,", "secondkey": "", "insertorder": 120, "comment": "Ruby",
             "content": "A red gem.", "mode": "normal", "alwaysActive": False,
             "selective": True, "activationPercent": 40},
            {"key": "dusk", "secondkey": "evening,  night", "insertorder": 80, "comment": "",
             "content": "Dusk.", "mode": "normal", "alwaysActive": True, "selective": False,
             "activationPercent": 0},
            {"key": "dawn", "content": "Dawn.", "mode": "normal"},
        ],
    }  # fmt: skip
    assert detect_lorebook_format(raw) == "risu"
    out = lorebook_to_json(read_lorebook(raw, name="risu"))
    first, second, third = (out["entries"][k] for k in ("0", "1", "2"))
    assert list(first) == IMPORTED_KEYS
    assert first["key"] == ["ruby", "red gem", ""] and first["keysecondary"] == []
    assert (first["order"], first["comment"], first["constant"], first["selective"]) == (
        120, "Ruby", False, True,
    )  # fmt: skip
    assert (first["probability"], first["useProbability"], first["addMemo"]) == (40, True, True)
    assert second["keysecondary"] == ["evening", "night"] and second["constant"] is True
    assert (second["probability"], second["useProbability"]) == (0, False)
    # Values Risu lacks are left out, as JSON.stringify drops undefined.
    assert {"comment", "constant", "selective", "order"}.isdisjoint(third)
    assert (third["probability"], third["useProbability"]) == (100, True)


def test_is_lorebook_tells_books_from_other_json() -> None:
    assert is_lorebook({"entries": {}})
    assert is_lorebook(b'{"entries": {"0": {"key": []}}}')
    assert not is_lorebook({"spec": "chara_card_v2", "data": {"character_book": {"entries": []}}})
    assert not is_lorebook({"name": "preset", "temperature": 1})
    assert not is_lorebook(b"\xff\xfe not json")
    assert not is_lorebook([1, 2])
    assert not is_lorebook({"entries": 5})


# --------------------------------------------------------------------------- bad input


def _error(data: Any, **kw: Any) -> FormatError:
    with pytest.raises(FormatError) as info:
        read_lorebook(data, source="bad.json", **kw)
    assert info.value.source == "bad.json"
    return info.value


def test_missing_entries() -> None:
    err = _error({"name": "x"})
    assert err.field == "entries" and "bad.json" in str(err)


def test_entries_not_an_object() -> None:
    assert _error({"entries": "oops"}).field == "entries"
    assert _error({"entries": {"3": 7}}).field == "entries.3"


def test_keys_not_a_list_of_strings() -> None:
    assert _error({"entries": {"3": {"uid": 3, "key": "dragon"}}}).field == "entries.3.key"
    err = _error({"entries": {"3": {"uid": 3, "key": ["ok", 5]}}})
    assert err.field == "entries.3.key.1"
    assert _error({"entries": {"0": {"uid": [1]}}}).field == "entries.0.uid"


def test_invalid_json_and_utf8() -> None:
    assert "invalid JSON" in str(_error(b'{"entries": {'))
    assert "UTF-8" in str(_error(b'{"entries": {}, "name": "\xff"}'))
    assert "object" in str(_error(b"[1, 2]"))


def test_bad_foreign_fields_are_named() -> None:
    assert _error({"lorebookVersion": 1, "entries": [{"keys": "a"}]}).field == "entries.0.keys"
    assert _error({"lorebookVersion": 1, "entries": "x"}).field == "entries"
    assert _error({"kind": "memory", "entries": [5]}).field == "entries.0"
    assert _error({"type": "risu", "data": [{"content": "no key"}]}).field == "data.0.key"
    assert _error({"type": "risu", "data": [{"key": "k", "insertorder": "1"}]}).field == (
        "data.0.insertorder"
    )
    assert _error({"entries": [{"keys": "not a list"}]}).field == "entries.0.keys"


def test_size_limits() -> None:
    limits = FormatLimits(lorebook_json_bytes=1000, text_field_chars=50)
    with pytest.raises(LimitExceeded):
        read_lorebook(b" " * 1001, limits=limits)
    # the card's cap is not the book's
    assert read_lorebook(b'{"entries": {}}' + b" " * 2000, limits=FormatLimits(card_json_bytes=100))
    with pytest.raises(LimitExceeded) as info:
        read_lorebook({"entries": {"4": {"content": "x" * 51}}}, source="big.json", limits=limits)
    assert info.value.field == "entries.4.content" and info.value.source == "big.json"


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError) as info:
        read_lorebook_file(tmp_path / "missing.json")
    assert "missing.json" in str(info.value)


def test_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "book.json"
    target.write_text('{"entries": {}}', encoding="utf-8")
    book = read_lorebook({"entries": {}, "extensions": {}})
    book.extensions["bad"] = object()
    with pytest.raises(FormatError):
        write_lorebook(book, target)

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("tavernkit.formats.file_io.os.fsync", broken_fsync)
    with pytest.raises(OSError):
        write_lorebook(read_lorebook({"entries": {"0": {"uid": 0}}}), target)
    assert target.read_text("utf-8") == '{"entries": {}}'
    assert [p.name for p in tmp_path.iterdir()] == ["book.json"]
