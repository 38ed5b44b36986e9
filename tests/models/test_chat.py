"""The chat and message models: lossless wire form, content parts, reasoning, swipes."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tavernkit.models.chat import (
    LEGACY_REASONING_PLACEHOLDER,
    Chat,
    ChatHeader,
    ChatMetadata,
    ImagePart,
    MediaItem,
    Message,
    MessageExtra,
    SwipeInfo,
    TextPart,
    TimedEffect,
    TimedWorldInfo,
    ToolInvocation,
)

BOT_MESSAGE: dict[str, Any] = {
    "name": "Aria",
    "is_user": False,
    "is_system": False,
    "send_date": "2025-01-01T10:00:00.000Z",
    "mes": "Second answer.",
    "extra": {
        "api": "openai",
        "model": "gpt-4o",
        "reasoning": "second thoughts",
        "reasoning_duration": 1200,
        "token_count": 3,
        "x_unknown": {"kept": [1, 2.5, None]},
    },
    "gen_started": "2025-01-01T09:59:58.000Z",
    "gen_finished": "2025-01-01T10:00:00.000Z",
    "swipe_id": 1,
    "swipes": ["First answer.", "Second answer."],
    "swipe_info": [
        {
            "send_date": "2025-01-01T09:00:00.000Z",
            "gen_started": "2025-01-01T08:59:59.000Z",
            "gen_finished": "2025-01-01T09:00:00.000Z",
            "extra": {"api": "openai", "model": "gpt-4o", "reasoning": "first thoughts"},
        },
        {
            "send_date": "2025-01-01T10:00:00.000Z",
            "gen_started": "2025-01-01T09:59:58.000Z",
            "gen_finished": "2025-01-01T10:00:00.000Z",
            "extra": {"api": "openai", "model": "gpt-4o", "reasoning": "second thoughts"},
        },
    ],
    "force_avatar": None,
    "custom_top_level": True,
}


def bot_message() -> Message:
    return Message.model_validate(copy.deepcopy(BOT_MESSAGE))


# --- wire form -------------------------------------------------------------------------------


def test_message_round_trip_keeps_values_unknown_keys_and_order() -> None:
    wire = bot_message().to_wire()
    assert wire == BOT_MESSAGE
    assert list(wire) == list(BOT_MESSAGE)
    assert list(wire["extra"]) == list(BOT_MESSAGE["extra"])
    assert list(wire["swipe_info"][0]) == list(BOT_MESSAGE["swipe_info"][0])


def test_numbers_stay_ints_and_send_date_keeps_its_original_form() -> None:
    raw = {"name": "A", "mes": "x", "send_date": 1687184400000, "extra": {"token_count": 100}}
    message = Message.model_validate(raw)
    assert message.to_wire() == raw
    assert isinstance(message.to_wire()["extra"]["token_count"], int)
    assert message.send_date == 1687184400000


def test_tool_invocations_are_typed_and_lossless() -> None:
    raw = {
        "name": "A",
        "mes": "",
        "extra": {
            "tool_invocations": [
                {
                    "id": "call_1",
                    "name": "roll",
                    "parameters": '{"sides":6}',
                    "result": "4",
                    "signature": "sig",
                    "x": 1,
                }
            ]
        },
    }
    message = Message.model_validate(raw)
    invocations = message.extra.tool_invocations
    assert invocations is not None
    assert invocations[0] == ToolInvocation.model_validate(raw["extra"]["tool_invocations"][0])
    assert invocations[0].parameters == '{"sides":6}'
    assert message.to_wire() == raw


def test_new_message_writes_what_sillytavern_writes() -> None:
    message = Message.new("User", "Hello", is_user=True, send_date="2025-01-01T00:00:00.000Z")
    assert message.to_wire() == {
        "name": "User",
        "is_user": True,
        "is_system": False,
        "send_date": "2025-01-01T00:00:00.000Z",
        "mes": "Hello",
        "extra": {},
    }


def test_extra_aliases_accept_both_names() -> None:
    extra = MessageExtra.model_validate({"isSmallSys": True})
    assert extra.is_small_sys is True
    assert extra.to_wire() == {"isSmallSys": True}
    assert MessageExtra(is_small_sys=True).to_wire() == {"isSmallSys": True}


def test_invalid_field_types_are_rejected() -> None:
    with pytest.raises(ValidationError):
        Message.model_validate({"name": "A", "mes": "x", "swipes": 5})
    with pytest.raises(ValidationError):
        Message.model_validate({"name": "A", "mes": "x", "swipe_info": [{"extra": "no"}]})


# --- content parts ---------------------------------------------------------------------------


def test_parts_write_their_type_first_and_are_discriminated() -> None:
    assert TextPart(text="hi").to_wire() == {"type": "text", "text": "hi"}
    assert list(ImagePart(url="https://x/y.png").to_wire()) == ["type", "url"]
    message = Message.model_validate(
        {
            "name": "User",
            "mes": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "data": "aGk=", "mime": "image/png", "detail": "low"},
                {"type": "image_url", "url": "https://example.org/cat.png"},
                {"type": "text", "text": "cute?"},
            ],
        }
    )
    assert isinstance(message.mes, list)
    assert [type(p) for p in message.mes] == [TextPart, ImagePart, ImagePart, TextPart]
    assert message.text == "Look:\ncute?"
    assert message.content is message.mes
    assert message.to_wire()["mes"][1] == {
        "type": "image",
        "data": "aGk=",
        "mime": "image/png",
        "detail": "low",
    }


def test_image_part_needs_a_source_and_unknown_part_types_fail() -> None:
    with pytest.raises(ValidationError):
        ImagePart()
    with pytest.raises(ValidationError):
        Message.model_validate({"mes": [{"type": "audio", "url": "x"}]})


def test_image_part_data_url() -> None:
    assert ImagePart(data="aGk=", mime="image/png").data_url == "data:image/png;base64,aGk="
    assert ImagePart(url="https://x/a.png").data_url == "https://x/a.png"
    assert ImagePart.from_url("data:image/webp;base64,aGk=") == ImagePart(
        data="aGk=", mime="image/webp"
    )
    # not base64: stays a URL
    assert ImagePart.from_url("data:text/plain,hello") == ImagePart(url="data:text/plain,hello")


def test_to_st_moves_images_to_media_and_parts_reads_them_back() -> None:
    message = Message.new(
        "User",
        [TextPart(text="Look"), ImagePart(data="aGk=", mime="image/png")],
        is_user=True,
    )
    st_message = message.to_st()
    assert st_message.to_wire() == {
        "name": "User",
        "is_user": True,
        "is_system": False,
        "mes": "Look",
        "extra": {"media": [{"url": "data:image/png;base64,aGk=", "type": "image"}]},
    }
    assert st_message.parts() == message.parts()
    assert isinstance(message.mes, list)  # the original is untouched


def test_to_st_is_identity_for_text_messages() -> None:
    message = bot_message()
    assert message.to_st() is message


def test_to_st_keeps_existing_media_first_and_writes_implicit_extra() -> None:
    message = Message.model_validate(
        {
            "name": "U",
            "mes": [{"type": "image_url", "url": "https://x/2.png"}],
        }
    )
    assert message.to_st().to_wire() == {
        "name": "U",
        "mes": "",
        "extra": {"media": [{"url": "https://x/2.png", "type": "image"}]},
    }
    message.extra = MessageExtra(media=[MediaItem(url="https://x/1.png", type="image")])
    media = message.to_st().extra.media
    assert media is not None
    assert [m.url for m in media] == ["https://x/1.png", "https://x/2.png"]


def test_parts_of_sillytavern_messages() -> None:
    plain = Message.model_validate({"mes": "hi", "extra": {}})
    assert plain.parts() == [TextPart(text="hi")]
    with_media = Message.model_validate(
        {
            "mes": "see",
            "extra": {
                "media": [
                    {"url": "/user/images/a.png", "type": "image", "title": "a"},
                    {"url": "/user/files/b.mp4", "type": "video"},
                ]
            },
        }
    )
    assert with_media.parts() == [TextPart(text="see"), ImagePart(url="/user/images/a.png")]
    legacy = Message.model_validate({"mes": "", "extra": {"image": "/user/images/old.png"}})
    assert legacy.parts() == [ImagePart(url="/user/images/old.png")]


_text = st.text(max_size=20)
_b64 = st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode("ascii"))
_images = st.one_of(
    st.builds(ImagePart, url=st.sampled_from(["https://x/a.png", "/user/images/b.jpg"])),
    st.builds(ImagePart, data=_b64, mime=st.sampled_from(["image/png", "image/jpeg"])),
)


@given(text=_text.filter(bool), images=st.lists(_images, max_size=3))
def test_parts_survive_the_sillytavern_form(text: str, images: list[ImagePart]) -> None:
    message = Message.new("U", [TextPart(text=text), *images], is_user=True)
    st_form = Message.model_validate(message.to_st().to_wire())
    assert isinstance(st_form.mes, str)
    assert st_form.text == text
    assert [p.data_url for p in st_form.parts()[1:]] == [p.data_url for p in images]
    assert st_form.parts() == [
        TextPart(text=text),
        *(ImagePart.from_url(p.data_url) for p in images),
    ]


# --- dates -----------------------------------------------------------------------------------


def test_sent_at_parses_and_takes_a_zone_for_legacy_dates() -> None:
    message = Message.model_validate({"mes": "", "send_date": "June 19, 2023 2:20pm"})
    assert message.sent_at == datetime(2023, 6, 19, 14, 20, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    assert message.sent_at_in(plus_two) == datetime(2023, 6, 19, 12, 20, tzinfo=UTC)
    assert Message.model_validate({"mes": ""}).sent_at is None
    assert Message.model_validate({"mes": "", "send_date": "garbage"}).sent_at is None


# --- reasoning -------------------------------------------------------------------------------


def test_active_swipe_reasoning_wins() -> None:
    message = bot_message()
    message.extra.reasoning = "stale top-level copy"
    assert message.current_reasoning == "second thoughts"
    assert message.has_reasoning


def test_message_reasoning_when_the_swipe_has_none() -> None:
    message = Message.model_validate(
        {
            "mes": "a",
            "extra": {"reasoning": "top"},
            "swipes": ["a"],
            "swipe_id": 0,
            "swipe_info": [{"send_date": "x", "extra": {}}],
        }
    )
    assert message.current_reasoning == "top"
    no_swipes = Message.model_validate({"mes": "a", "extra": {"reasoning": "only"}})
    assert no_swipes.current_reasoning == "only"


def test_empty_swipe_reasoning_is_present_and_wins() -> None:
    message = Message.model_validate(
        {
            "mes": "a",
            "extra": {"reasoning": "other swipe's"},
            "swipes": ["a"],
            "swipe_id": 0,
            "swipe_info": [{"extra": {"reasoning": ""}}],
        }
    )
    assert message.current_reasoning == ""
    assert not message.has_reasoning


def test_no_reasoning_and_the_legacy_placeholder() -> None:
    assert Message.model_validate({"mes": "a"}).current_reasoning == ""
    assert not Message.model_validate({"mes": "a"}).has_reasoning
    placeholder = Message.model_validate(
        {"mes": "a", "extra": {"reasoning": LEGACY_REASONING_PLACEHOLDER}}
    )
    assert not placeholder.has_reasoning


def test_out_of_range_swipe_id_falls_back_to_the_message() -> None:
    message = Message.model_validate(
        {
            "mes": "a",
            "extra": {"reasoning": "top"},
            "swipes": ["a"],
            "swipe_id": 3,
            "swipe_info": [{"extra": {"reasoning": "swipe"}}],
        }
    )
    assert message.current_reasoning == "top"
    assert message.active_swipe is None


# --- swipes ----------------------------------------------------------------------------------


def test_active_swipe() -> None:
    swipe = bot_message().active_swipe
    assert swipe is not None
    assert (swipe.index, swipe.text) == (1, "Second answer.")
    assert swipe.info is not None
    assert swipe.info.send_date == "2025-01-01T10:00:00.000Z"
    assert Message.model_validate({"mes": "x"}).active_swipe is None


def test_select_swipe_copies_text_and_info_to_the_top_level() -> None:
    message = bot_message()
    message.select_swipe(0)
    assert message.swipe_id == 0
    assert message.mes == "First answer."
    assert message.send_date == "2025-01-01T09:00:00.000Z"
    assert message.gen_started == "2025-01-01T08:59:59.000Z"
    assert message.extra.reasoning == "first thoughts"
    assert message.current_reasoning == "first thoughts"
    # the swipe left behind got the top level, including the top-level-only extra key
    left = message.swipe_info[1] if message.swipe_info else None
    assert left is not None
    assert left.extra is not None
    assert left.extra.to_wire()["x_unknown"] == {"kept": [1, 2.5, None]}
    message.select_swipe(1)
    assert message.to_wire()["extra"] == BOT_MESSAGE["extra"]
    assert message.mes == "Second answer."


def test_select_swipe_keeps_an_edit_of_the_swipe_left() -> None:
    message = bot_message()
    message.mes = "Second answer, edited."
    message.select_swipe(0)
    message.select_swipe(1)
    assert message.mes == "Second answer, edited."
    assert message.swipes == ["First answer.", "Second answer, edited."]


def test_select_swipe_without_stored_extra_keeps_the_current_extra() -> None:
    message = Message.model_validate(
        {
            "mes": "b",
            "extra": {"model": "m"},
            "gen_started": "g",
            "swipes": ["a", "b"],
            "swipe_id": 1,
            "swipe_info": [{"send_date": "d0"}, {"send_date": "d1", "gen_started": "g"}],
        }
    )
    message.select_swipe(0)
    assert message.extra.model == "m"
    assert message.send_date == "d0"
    # the chosen swipe has no start time; another swipe's must not stand for it
    assert "gen_started" not in message.to_wire()


def test_select_swipe_out_of_range() -> None:
    with pytest.raises(IndexError):
        bot_message().select_swipe(2)
    with pytest.raises(IndexError):
        Message.model_validate({"mes": "x"}).select_swipe(0)


def test_add_swipe_to_a_message_without_swipes() -> None:
    message = Message.model_validate(
        {"name": "Aria", "mes": "one", "send_date": "d1", "extra": {"reasoning": "r1"}}
    )
    info = SwipeInfo(send_date="d2", extra=MessageExtra(reasoning="r2"))
    assert message.add_swipe("two", info) == 1
    wire = message.to_wire()
    assert wire["mes"] == "two"
    assert wire["swipes"] == ["one", "two"]
    assert wire["swipe_id"] == 1
    assert wire["send_date"] == "d2"
    assert wire["swipe_info"] == [
        {"send_date": "d1", "extra": {"reasoning": "r1"}},
        {"send_date": "d2", "extra": {"reasoning": "r2"}},
    ]
    assert message.current_reasoning == "r2"


def test_add_swipe_without_select_waits_in_the_list() -> None:
    message = bot_message()
    index = message.add_swipe("third", select=False)
    assert index == 2
    assert message.swipe_id == 1
    assert message.mes == "Second answer."
    assert message.swipes is not None
    assert message.swipes[2] == "third"
    message.select_swipe(2)
    assert message.mes == "third"
    # a fresh swipe has an empty extra: its reasoning is not the previous swipe's
    assert message.current_reasoning == ""


def test_add_swipe_pads_short_swipe_info() -> None:
    message = Message.model_validate({"mes": "a", "swipes": ["a", "b"], "swipe_id": 0})
    message.add_swipe("c")
    assert message.swipe_info is not None
    assert len(message.swipe_info) == 3
    assert message.swipe_id == 2


def test_ensure_swipes_sets_a_missing_swipe_id() -> None:
    message = Message.model_validate({"mes": "a", "swipes": ["a"]})
    message.ensure_swipes()
    assert message.swipe_id == 0


# --- metadata, header, chat ------------------------------------------------------------------


def test_chat_metadata_known_keys_aliases_and_extras() -> None:
    raw = {
        "integrity": "0d5c3c5e-8a4c-4ad2-9b9e-000000000000",
        "chat_id_hash": 5059632880024851,
        "variables": {"mood": "calm", "count": 3},
        "timedWorldInfo": {
            "sticky": {
                "Lore.1": {"hash": 5059632880024851, "start": 1, "end": 2, "protected": False}
            },
            "cooldown": {},
        },
        "note_prompt": "Be terse.",
        "note_interval": 1,
        "note_depth": 4,
        "note_position": 1,
        "note_role": 0,
        "lastInContextMessageId": 12,
        "cfg_guidance": {"x": 1},
        "quickReply": {"setList": []},
    }
    metadata = ChatMetadata.model_validate(raw)
    assert metadata.timed_world_info is not None
    sticky = metadata.timed_world_info.sticky["Lore.1"]
    assert sticky == TimedEffect(hash=5059632880024851, start=1, end=2, protected=False)
    assert metadata.last_in_context_message_id == 12
    assert metadata.to_wire() == raw
    assert list(metadata.to_wire()) == list(raw)


def test_header_new_and_legacy_header() -> None:
    assert ChatHeader.new().to_wire() == {
        "chat_metadata": {},
        "user_name": "unused",
        "character_name": "unused",
    }
    legacy = {"user_name": "You", "character_name": "Aria", "create_date": "2023-6-19 @14h 20m 15s"}
    header = ChatHeader.model_validate(legacy)
    assert header.to_wire() == legacy
    assert header.character_name == "Aria"


def test_chat_creates_variables_and_timed_state_on_first_use() -> None:
    chat = Chat()
    assert chat.header.to_wire()["chat_metadata"] == {}
    chat.variables["x"] = 1
    chat.timed_world_info.sticky["W.1"] = TimedEffect(hash=1, start=0, end=3, protected=False)
    assert chat.header.to_wire()["chat_metadata"] == {
        "variables": {"x": 1},
        "timedWorldInfo": {
            "sticky": {"W.1": {"hash": 1, "start": 0, "end": 3, "protected": False}},
            "cooldown": {},
        },
    }
    assert isinstance(chat.timed_world_info, TimedWorldInfo)


def test_a_write_into_a_default_part_is_kept_by_to_wire() -> None:
    # a message read without "extra": the summary box writes extra.memory into the default
    message = Message.model_validate({"name": "Mira", "is_user": False, "mes": "b"})
    assert "extra" not in message.to_wire()
    message.extra.memory = "S1"
    assert message.to_wire() == {
        "name": "Mira",
        "is_user": False,
        "mes": "b",
        "extra": {"memory": "S1"},
    }
    # an untouched default is still left out (a read file round-trips unchanged)
    plain = {"name": "Ada", "is_user": True, "mes": "a"}
    assert Message.model_validate(plain).to_wire() == plain
