"""SillyTavern ``.jsonl`` chats: lossless round trips, send_date formats, bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.errors import FormatError, LimitExceeded
from tavernkit.formats.chats import (
    chat_to_jsonl,
    format_send_date,
    is_chat_jsonl,
    parse_send_date,
    read_chat_file,
    read_chat_jsonl,
    write_chat_jsonl,
)
from tavernkit.formats.file_io import FormatLimits
from tavernkit.models.chat import Chat, ChatHeader, ImagePart, Message, TextPart


def js_line(value: Any) -> str:
    """A line as JavaScript's JSON.stringify writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def jsonl(*lines: Any) -> str:
    return "\n".join(js_line(line) for line in lines)


HEADER = {
    "chat_metadata": {
        "integrity": "3f0c8e52-6a8b-4c1e-9a55-1c2d3e4f5a6b",
        "chat_id_hash": 8142312391,
        "variables": {"visits": 2},
        "timedWorldInfo": {"sticky": {}, "cooldown": {}},
        "note_prompt": "",
        "note_interval": 1,
        "note_position": 1,
        "note_depth": 4,
        "note_role": 0,
        "tainted": True,
        "lastInContextMessageId": 0,
    },
    "user_name": "unused",
    "character_name": "unused",
}

USER = {
    "name": "User",
    "is_user": True,
    "is_system": False,
    "send_date": "2025-03-01T18:22:05.120Z",
    "mes": "Héllo — 🐉 there",
    "extra": {"isSmallSys": False},
    "force_avatar": "User Avatars/user-default.png",
}

BOT = {
    "extra": {
        "api": "openai",
        "model": "gpt-4o",
        "reasoning": "Think",
        "reasoning_duration": None,
        "token_count": 12,
    },
    "name": "Aria",
    "is_user": False,
    "is_system": False,
    "send_date": "2025-03-01T18:22:09.800Z",
    "mes": "Hi.",
    "swipe_id": 0,
    "swipes": ["Hi."],
    "swipe_info": [{"send_date": "2025-03-01T18:22:09.800Z", "extra": {"api": "openai"}}],
    "gen_started": "2025-03-01T18:22:07.000Z",
    "gen_finished": "2025-03-01T18:22:09.800Z",
}


# --- round trips -----------------------------------------------------------------------------


def test_read_and_write_back_is_byte_identical_for_js_output() -> None:
    source = jsonl(HEADER, USER, BOT)
    chat = read_chat_jsonl(source)
    assert chat.header.chat_metadata.variables == {"visits": 2}
    assert [m.name for m in chat.messages] == ["User", "Aria"]
    assert chat.messages[1].current_reasoning == "Think"
    assert chat_to_jsonl(chat) == source


def test_writer_output_is_json_stringify_style() -> None:
    text = chat_to_jsonl(read_chat_jsonl(jsonl(HEADER, USER)))
    assert not text.endswith("\n")
    assert ", " not in text.splitlines()[0]
    assert "🐉" in text  # non-ASCII kept as is
    assert "\\u" not in text


def test_lone_surrogates_are_escaped_as_javascript_does() -> None:
    source = jsonl(HEADER) + '\n{"name":"A","mes":"half \\ud83d pair"}'
    chat = read_chat_jsonl(source)
    out = chat_to_jsonl(chat)
    assert out == source
    out.encode("utf-8")  # writable as UTF-8


def test_legacy_header_with_names_and_create_date() -> None:
    header = {
        "user_name": "You",
        "character_name": "Aria",
        "create_date": "2023-6-19 @14h 20m 15s 331ms",
        "chat_metadata": {"note_prompt": "x"},
    }
    old_message = {
        "name": "Aria",
        "is_user": False,
        "is_name": True,
        "send_date": "June 19, 2023 2:20pm",
        "mes": "Welcome!",
        "chid": 3,
    }
    source = jsonl(header, old_message)
    chat = read_chat_jsonl(source)
    assert chat.header.character_name == "Aria"
    assert chat.messages[0].sent_at == datetime(2023, 6, 19, 14, 20, tzinfo=UTC)
    assert chat_to_jsonl(chat) == source


def test_header_only_chat() -> None:
    chat = read_chat_jsonl(jsonl(HEADER))
    assert chat.messages == []
    assert chat_to_jsonl(chat) == jsonl(HEADER)


def test_new_chat_is_written_with_the_1_18_header() -> None:
    chat = Chat(messages=[Message.new("User", "hi", is_user=True, send_date="d")])
    lines = chat_to_jsonl(chat).split("\n")
    assert json.loads(lines[0]) == {
        "chat_metadata": {},
        "user_name": "unused",
        "character_name": "unused",
    }
    assert read_chat_jsonl(chat_to_jsonl(chat)) == chat


def test_multimodal_messages_are_written_as_sillytavern_stores_them() -> None:
    chat = Chat(
        messages=[
            Message.new(
                "User",
                [TextPart(text="What is this?"), ImagePart(data="aGk=", mime="image/png")],
                is_user=True,
            )
        ]
    )
    line = json.loads(chat_to_jsonl(chat).split("\n")[1])
    assert line["mes"] == "What is this?"
    assert line["extra"]["media"] == [{"url": "data:image/png;base64,aGk=", "type": "image"}]
    back = read_chat_jsonl(chat_to_jsonl(chat)).messages[0]
    assert back.parts() == chat.messages[0].parts()


def test_bom_crlf_and_blank_lines_are_tolerated() -> None:
    source = jsonl(HEADER, USER, BOT)
    crlf = "\ufeff" + source.replace("\n", "\r\n") + "\r\n\r\n"
    chat = read_chat_jsonl(crlf.encode("utf-8"))
    assert chat_to_jsonl(chat) == source
    with_gap = jsonl(HEADER, USER) + "\n\n" + js_line(BOT) + "\n"
    assert chat_to_jsonl(read_chat_jsonl(with_gap)) == source


def test_headerless_file_gets_a_fresh_header() -> None:
    source = jsonl(USER, BOT)
    chat = read_chat_jsonl(source)
    assert len(chat.messages) == 2
    assert chat.header.to_wire() == ChatHeader.new().to_wire()
    assert chat_to_jsonl(chat) == jsonl(ChatHeader.new().to_wire(), USER, BOT)


def test_write_and_read_file(tmp_path: Path) -> None:
    chat = read_chat_jsonl(jsonl(HEADER, USER, BOT))
    path = tmp_path / "Aria - 2025-03-01@18h22m05s.jsonl"
    write_chat_jsonl(chat, path)
    assert path.read_text(encoding="utf-8") == jsonl(HEADER, USER, BOT)
    assert read_chat_file(path) == chat


def test_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("old", encoding="utf-8")
    chat = Chat(messages=[Message.new("A", "x", is_user=True)])
    chat.messages[0].extra = chat.messages[0].extra.model_copy(update={"weird": object()})
    with pytest.raises(FormatError) as info:
        write_chat_jsonl(chat, path)
    assert info.value.field == "messages[0]"
    assert path.read_text(encoding="utf-8") == "old"
    assert list(tmp_path.iterdir()) == [path]


# --- real messages from SillyTavern (the prompt goldens) -------------------------------------


@pytest.fixture
def golden_messages(st_default_data: Path) -> list[dict[str, Any]]:
    prompts = st_default_data.parent.parent / "st-1.18" / "prompts"
    files = sorted(prompts.glob("*.json"))
    if not files:
        pytest.skip(f"no prompt golden cases under {prompts}")
    messages: list[dict[str, Any]] = []
    for file in files:
        case = json.loads(file.read_text(encoding="utf-8"))
        messages.extend(case.get("inputs", {}).get("chat") or [])
    assert messages
    return messages


def test_golden_chats_round_trip(golden_messages: list[dict[str, Any]]) -> None:
    source = jsonl(HEADER, *golden_messages)
    chat = read_chat_jsonl(source)
    assert len(chat.messages) == len(golden_messages)
    assert chat_to_jsonl(chat) == source
    dated = [m for m in chat.messages if m.send_date]
    assert all(m.sent_at is not None for m in dated)


# SillyTavern messages are read and written by their real fields; hypothesis varies which fields
# are present, their order, their values and unknown keys at every level.
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_dates = st.one_of(
    st.just("2025-03-01T18:22:05.120Z"),
    st.just("June 19, 2023 2:20pm"),
    st.just("2024-6-5 @14h 56m 50s 682ms"),
    st.integers(min_value=1, max_value=2**45),
    st.text(max_size=10),
)
_unknown_keys = st.text(min_size=1, max_size=8).map(lambda k: "x_" + k)


@st.composite
def _record(draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), unique=True))
    record = {name: draw(fields[name]) for name in chosen}
    record.update(draw(st.dictionaries(_unknown_keys, _json, max_size=2)))
    order = draw(st.permutations(list(record)))
    return {key: record[key] for key in order}


_extra = _record(
    {
        "api": st.text(max_size=8),
        "model": st.none() | st.text(max_size=8),
        "type": st.sampled_from(["narrator", "assistant_note"]),
        "gen_id": st.integers(min_value=0, max_value=2**53),
        "token_count": st.integers(min_value=0, max_value=5000),
        "reasoning": st.text(max_size=20),
        "reasoning_duration": st.none() | st.integers(min_value=0) | st.floats(0, 1e6),
        "reasoning_type": st.sampled_from(["model", "parsed", "manual", "edited"]),
        "display_text": st.text(max_size=8),
        "isSmallSys": st.booleans(),
        "bias": st.none() | st.text(max_size=8),
        "tool_invocations": st.lists(
            _record(
                {
                    "id": st.text(max_size=6),
                    "name": st.text(max_size=6),
                    "parameters": st.text(max_size=10),
                    "result": st.text(max_size=10),
                    "signature": st.text(max_size=6),
                }
            ),
            max_size=2,
        ),
        "media": st.lists(
            _record({"url": st.text(max_size=10), "type": st.just("image"), "title": st.text()}),
            max_size=2,
        ),
    }
)
_swipe_info = _record(
    {
        "send_date": _dates,
        "gen_started": st.none() | _dates,
        "gen_finished": st.none() | _dates,
        "extra": _extra,
    }
)
_message = _record(
    {
        "name": st.text(max_size=10),
        "is_user": st.booleans(),
        "is_system": st.booleans(),
        "send_date": _dates,
        "mes": st.text(max_size=40),
        "gen_started": _dates,
        "gen_finished": _dates,
        "force_avatar": st.none() | st.text(max_size=10),
        "title": st.text(max_size=10),
        "swipes": st.lists(st.text(max_size=10), max_size=3),
        "swipe_id": st.integers(min_value=0, max_value=3),
        "swipe_info": st.lists(_swipe_info, max_size=3),
        "extra": _extra,
    }
)
_metadata = _record(
    {
        "integrity": st.uuids().map(str),
        "chat_id_hash": st.integers(min_value=0, max_value=2**53),
        "variables": st.dictionaries(st.text(max_size=5), _json_scalars, max_size=3),
        "note_prompt": st.text(max_size=10),
        "note_depth": st.integers(0, 100),
        "note_role": st.integers(0, 2),
        "world_info": st.text(max_size=8),
        "main_chat": st.text(max_size=8),
        "timedWorldInfo": st.just({"sticky": {}, "cooldown": {}}),
    }
)
_header = _record(
    {
        "chat_metadata": _metadata,
        "user_name": st.text(max_size=8),
        "character_name": st.text(max_size=8),
        "create_date": _dates,
    }
).filter(lambda h: bool({"chat_metadata", "user_name", "character_name", "create_date"} & h.keys()))


@settings(max_examples=60, deadline=None)
@given(header=_header, messages=st.lists(_message, max_size=5))
def test_read_write_is_identity_for_random_chats(
    header: dict[str, Any], messages: list[dict[str, Any]]
) -> None:
    source = jsonl(header, *messages)
    chat = read_chat_jsonl(source)
    assert len(chat.messages) == len(messages)
    out = chat_to_jsonl(chat)
    assert out == source
    assert read_chat_jsonl(out) == chat


def test_read_write_is_identity_for_mixed_real_messages(
    golden_messages: list[dict[str, Any]],
) -> None:
    # An inner @given: the fixture is read once and only read, never mutated, by every example.
    @settings(max_examples=25, deadline=None)
    @given(
        picked=st.lists(st.sampled_from(golden_messages), min_size=1, max_size=8),
        extras=st.lists(_message, max_size=3),
    )
    def check(picked: list[dict[str, Any]], extras: list[dict[str, Any]]) -> None:
        source = jsonl(HEADER, *picked, *extras)
        assert chat_to_jsonl(read_chat_jsonl(source)) == source

    check()


# --- bad input -------------------------------------------------------------------------------


def _lines_with(bad: str, at: int) -> str:
    lines = [js_line(HEADER)] + [js_line(USER)] * 9
    lines[at - 1] = bad
    return "\n".join(lines)


def test_invalid_json_names_its_line() -> None:
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(_lines_with('{"name": "A", "mes": ', 7), source="chat.jsonl")
    assert info.value.field == "line 7"
    assert info.value.source == "chat.jsonl"
    assert "line 7" in str(info.value)
    assert "chat.jsonl" in str(info.value)


def test_bad_utf8_names_its_line() -> None:
    data = _lines_with(js_line(USER), 1).encode("utf-8").split(b"\n")
    data[2] = b'{"name":"A","mes":"\xff\xfe"}'
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(b"\n".join(data), source="c.jsonl")
    assert info.value.field == "line 3"
    assert "UTF-8" in str(info.value)


@pytest.mark.parametrize("header", ["[1, 2]", '"chat"', "42", "null"])
def test_header_must_be_an_object(header: str) -> None:
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(header + "\n" + js_line(USER))
    assert info.value.field == "line 1"
    assert "not an object" in str(info.value)


def test_message_must_be_an_object() -> None:
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(_lines_with('["not", "a", "message"]', 4))
    assert info.value.field == "line 4"


def test_invalid_message_field_names_line_and_path() -> None:
    bad = dict(BOT, swipe_info=[{"extra": {}}, {"extra": {"reasoning_duration": "slow"}}])
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(_lines_with(js_line(bad), 5))
    assert info.value.field == "line 5: swipe_info[1].extra.reasoning_duration"
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(_lines_with(js_line(dict(USER, swipes=5)), 2))
    assert info.value.field == "line 2: swipes"
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(jsonl(dict(HEADER, chat_metadata=[])))
    assert info.value.field == "line 1: chat_metadata"


def test_nan_and_deep_nesting_are_format_errors() -> None:
    with pytest.raises(FormatError) as info:
        read_chat_jsonl(_lines_with('{"name":"A","mes":"x","extra":{"token_count":NaN}}', 3))
    assert info.value.field == "line 3"
    with pytest.raises(FormatError):
        read_chat_jsonl(_lines_with('{"mes":' + "[" * 100_000 + "]" * 100_000 + "}", 2))


@pytest.mark.parametrize("empty", ["", "\n\n", b"", b"\xef\xbb\xbf"])
def test_empty_input_is_a_format_error(empty: str | bytes) -> None:
    with pytest.raises(FormatError, match="no header"):
        read_chat_jsonl(empty)


def test_limits() -> None:
    source = jsonl(HEADER, USER)
    with pytest.raises(LimitExceeded):
        read_chat_jsonl(source, limits=FormatLimits(chat_file_bytes=len(source) - 1))
    long_text = dict(USER, mes="x" * 101)
    with pytest.raises(LimitExceeded) as info:
        read_chat_jsonl(jsonl(HEADER, long_text), limits=FormatLimits(text_field_chars=100))
    assert info.value.field == "line 2: mes"
    assert read_chat_jsonl(jsonl(HEADER, long_text), limits=FormatLimits(text_field_chars=101))


def test_read_chat_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(js_line(HEADER) + "\n{oops", encoding="utf-8")
    with pytest.raises(FormatError) as info:
        read_chat_file(path)
    assert info.value.source == str(path)
    assert info.value.field == "line 2"
    with pytest.raises(FormatError):
        read_chat_file(tmp_path / "missing.jsonl")


# --- detection -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (jsonl(HEADER, USER), True),
        (jsonl(HEADER).encode("utf-8"), True),
        (jsonl({"user_name": "You", "character_name": "Aria", "create_date": 1}), True),
        (jsonl(USER, BOT), True),
        ("\ufeff" + jsonl(HEADER), True),
        (js_line({"name": "Aria", "description": "x", "first_mes": "hi"}), False),
        (json.dumps({"spec": "chara_card_v2", "data": {"name": "A"}}, indent=4), False),
        (js_line({"entries": {"0": {"uid": 0, "key": ["a"]}}}), False),
        (js_line({"id": "e2e_001", "input": "{{user}}", "output": "User"}), False),
        (b"\x89PNG\r\n\x1a\n\x00\x00", False),
        (b"", False),
        ("\n" + jsonl(HEADER), False),
        ("[1,2]", False),
    ],
)
def test_is_chat_jsonl(data: str | bytes, expected: bool) -> None:
    assert is_chat_jsonl(data) is expected


# --- send_date -------------------------------------------------------------------------------


PLUS_TWO = timezone(timedelta(hours=2))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-07-12T01:31:37.123Z", datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)),
        ("2024-07-12T01:31:37Z", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-07-12T03:31:37.123+02:00", datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)),
        (1720747897123, datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)),
        ("1720747897123", datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)),
        (1720747897123.0, datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)),
        ("June 19, 2023 2:20pm", datetime(2023, 6, 19, 14, 20, tzinfo=UTC)),
        ("June 19, 2023 12:05am", datetime(2023, 6, 19, 0, 5, tzinfo=UTC)),
        ("June 19, 2023 12:05pm", datetime(2023, 6, 19, 12, 5, tzinfo=UTC)),
        ("Sep 3, 2023 9:07 AM", datetime(2023, 9, 3, 9, 7, tzinfo=UTC)),
        ("January 1, 2025 12:00am", datetime(2025, 1, 1, tzinfo=UTC)),
        ("2024-07-12@01h31m37s123ms", datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)),
        ("2024-7-2@1h3m7s", datetime(2024, 7, 2, 1, 3, 7, tzinfo=UTC)),
        ("2024-6-5 @14h 56m 50s 682ms", datetime(2024, 6, 5, 14, 56, 50, 682000, tzinfo=UTC)),
        ("2024-6-5 @14h 56m 50s 7ms", datetime(2024, 6, 5, 14, 56, 50, 7000, tzinfo=UTC)),
        ("2024-6-5 @14h 56m 50s", datetime(2024, 6, 5, 14, 56, 50, tzinfo=UTC)),
        ("2024-07-12", datetime(2024, 7, 12, tzinfo=UTC)),
    ],
)
def test_parse_send_date_formats(value: object, expected: datetime) -> None:
    assert parse_send_date(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "June 19, 2023 2:20pm",
        "2024-07-12@01h31m37s123ms",
        "2024-6-5 @14h 56m 50s 682ms",
        "2024-07-12T01:31:37.123",
    ],
)
def test_naive_legacy_dates_are_local_time_in_tz(value: str) -> None:
    utc = parse_send_date(value)
    local = parse_send_date(value, tz=PLUS_TWO)
    assert utc is not None
    assert local is not None
    assert local.utcoffset() == timedelta(hours=2)
    assert utc - local == timedelta(hours=2)


def test_zoned_and_epoch_dates_ignore_tz() -> None:
    assert parse_send_date("2024-07-12T01:31:37.123Z", tz=PLUS_TWO) == parse_send_date(
        "2024-07-12T01:31:37.123Z"
    )
    assert parse_send_date(1720747897123, tz=PLUS_TWO) == parse_send_date(1720747897123)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        0,
        "0",
        True,
        False,
        "garbage",
        "Smarch 3, 2023 1:00pm",
        "February 30, 2023 1:00pm",
        "2024-13-01@01h01m01s",
        "2024-02-02T25:00:00Z",
        10**30,
        float("nan"),
        [],
        {},
    ],
)
def test_unreadable_send_dates_are_none(value: object) -> None:
    assert parse_send_date(value) is None


def test_format_send_date_is_to_iso_string() -> None:
    assert format_send_date(datetime(2024, 7, 12, 1, 31, 37, 123999, tzinfo=UTC)) == (
        "2024-07-12T01:31:37.123Z"
    )
    assert format_send_date(datetime(2024, 7, 12, 3, 31, 37, tzinfo=PLUS_TWO)) == (
        "2024-07-12T01:31:37.000Z"
    )
    assert format_send_date(datetime(5, 1, 2)) == "0005-01-02T00:00:00.000Z"


@given(
    st.datetimes(
        min_value=datetime(1971, 1, 1),
        max_value=datetime(9998, 12, 31),
        timezones=st.sampled_from([UTC, PLUS_TWO, timezone(timedelta(hours=-9, minutes=-30))]),
    )
)
def test_format_then_parse_is_identity_to_the_millisecond(moment: datetime) -> None:
    text = format_send_date(moment)
    expected = moment.astimezone(UTC).replace(microsecond=moment.microsecond // 1000 * 1000)
    assert parse_send_date(text) == expected
    epoch_ms = (expected - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert parse_send_date(epoch_ms) == expected
    assert parse_send_date(str(epoch_ms)) == expected
