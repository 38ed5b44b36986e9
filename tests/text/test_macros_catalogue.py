"""The catalogue by family: names, card, chat, instruct, time, random/pick/roll."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tavernkit.text.macros import MacroEnv, env_from_chat_state, render_macros, substitute_macros
from tavernkit.text.macros.dice import MAX_DICE, DiceError, parse_dice, roll_dice
from tavernkit.text.macros.seeding import Arc4Random, string_hash
from tavernkit.text.macros.timefmt import format_moment, humanize


class SeqRandom:
    """A fixed sequence of draws (so dice and random picks are checkable)."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0) if self.values else 0.0


def test_names_and_card_fields(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(
        description="D",
        personality="P",
        scenario="S",
        persona="Pe",
        char_version="v2",
        first_message="hi",
        alternate_greetings=["alt1", "alt2"],
        group="A, B",
        creator_notes="N",
        mes_examples_raw="<START>",
        char_depth_prompt="deep",
    )
    text = (
        "{{description}}{{charPersonality}}{{scenario}}{{persona}}{{version}}|{{greeting}}"
        "|{{charFirstMessage::2}}|{{group}}|{{charIfNotGroup}}|{{creatorNotes}}"
        "|{{mesExamplesRaw}}|{{charDepthPrompt}}|{{notChar}}"
    )
    assert substitute_macros(text, env) == "DPSPev2|hi|alt2|A, B|A, B|N|<START>|deep|User"


def test_chat_and_state_macros(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(
        last_message="m3",
        last_message_id=2,
        last_user_message="u",
        last_char_message="c",
        last_swipe_id=2,
        current_swipe_id=1,
        model="gpt-x",
        max_context=8192,
        extensions=["memory"],
        input="typed",
    )
    text = (
        "{{lastMessage}}|{{lastMessageId}}|{{lastUserMessage}}|{{lastCharMessage}}"
        "|{{lastSwipeId}}|{{currentSwipeId}}|{{allChatRange}}|{{model}}|{{maxContextTokens}}"
        "|{{hasExtension::memory}}|{{hasExtension::x}}|{{input}}"
    )
    assert substitute_macros(text, env) == "m3|2|u|c|2|1|0-2|gpt-x|8192|true|false|typed"


def test_instruct_macros_follow_instruct_mode(make_env: Callable[..., MacroEnv]) -> None:
    instruct = {"input_sequence": "### In", "output_sequence": "### Out", "stop_sequence": "</s>"}
    text = "{{instructInput}}|{{instructFirstOutputPrefix}}|{{instructStop}}|{{systemPrompt}}"
    env = make_env(
        instruct=instruct, instruct_enabled=True, sysprompt_enabled=True, system_prompt="Be nice."
    )
    assert substitute_macros(text, env) == "### In|### Out|</s>|Be nice."
    env = make_env(instruct=instruct, instruct_enabled=False, char_prompt="Card prompt")
    assert substitute_macros(text, env) == "|||Card prompt"


def test_time_macros_use_the_injected_clock(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(tz=timezone(timedelta(hours=2)))
    text = "{{time}}|{{date}}|{{weekday}}|{{isotime}}|{{isodate}}|{{time::UTC-5}}"
    assert substitute_macros(text, env) == (
        "4:07 PM|March 5, 2024|Tuesday|16:07|2024-03-05|9:07 AM"
    )
    fmt = "{{datetimeformat::dddd, Do MMM YYYY [at] HH:mm:ss ZZ}}"
    assert substitute_macros(fmt, env) == "Tuesday, 5th Mar 2024 at 16:07:09 +0200"


def test_idle_duration_and_time_diff(make_env: Callable[..., MacroEnv]) -> None:
    now = datetime(2024, 3, 5, 14, 0, tzinfo=UTC)
    env = make_env(clock=lambda: now, idle_since=now - timedelta(minutes=90))
    assert substitute_macros("{{idle_duration}}", env) == "2 hours"
    assert substitute_macros("{{idleDuration}}", make_env()) == "just now"
    assert substitute_macros("{{timeDiff::2024-01-01::2024-03-01}}", env) == "2 months ago"
    assert substitute_macros("{{timeDiff::nope::2024-03-01}}", env) == "Invalid date"


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (30_000, "a few seconds"),
        (50_000, "a minute"),
        (44 * 60_000, "44 minutes"),
        (50 * 60_000, "an hour"),
        (21 * 3_600_000, "21 hours"),
        (22 * 3_600_000, "a day"),
        (25 * 86_400_000, "25 days"),
        (26 * 86_400_000, "a month"),
        (320 * 86_400_000, "a year"),
        (800 * 86_400_000, "2 years"),
    ],
)
def test_humanize_thresholds(ms: int, text: str) -> None:
    assert humanize(ms) == text
    assert humanize(-ms, with_suffix=True) == f"{text} ago"


def test_moment_week_tokens() -> None:
    moment = datetime(2021, 1, 1, tzinfo=UTC)  # a Friday in ISO week 53 of 2020
    assert format_moment(moment, "W GGGG w gggg LT") == "53 2020 1 2021 12:00 AM"


def test_roll_with_injected_rng(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(rng=SeqRandom(0.0, 0.99, 0.5))
    assert substitute_macros("{{roll::3d6+1}}", env) == str(1 + 6 + 4 + 1)
    assert roll_dice("d20", SeqRandom(0.999)) == 20


def test_dice_caps_are_an_error_result_not_a_hang(make_env: Callable[..., MacroEnv]) -> None:
    result = render_macros("[{{roll::1000000d6}}]", make_env())
    assert result.text == "[]"
    assert any("too many dice" in w for w in result.warnings)
    with pytest.raises(DiceError):
        parse_dice(f"{MAX_DICE + 1}d6")
    with pytest.raises(DiceError):
        parse_dice("1d99999999999")
    assert parse_dice("6") == parse_dice("1d6")


def test_random_uses_the_injected_rng(make_env: Callable[..., MacroEnv]) -> None:
    env = make_env(rng=SeqRandom(0.0, 0.7, 0.99))
    assert substitute_macros("{{random::a::b::c}}{{random:a,b,c}}{{random a\\,b,c}}", env) == (
        "acc"
    )


def test_pick_is_stable_per_chat_and_position(make_env: Callable[..., MacroEnv]) -> None:
    text = "{{pick::a::b::c::d::e::f::g::h}} {{pick::a::b::c::d::e::f::g::h}}"
    first = substitute_macros(text, make_env(chat_id="chat-1"))
    assert first == substitute_macros(text, make_env(chat_id="chat-1"))
    others = {substitute_macros(text, make_env(chat_id=f"chat-{i}")) for i in range(8)}
    assert len(others) > 1
    rerolled = {
        substitute_macros(text, make_env(chat_id="chat-1", pick_reroll_seed=i)) for i in range(1, 8)
    }
    assert len(rerolled) > 1


def test_seedrandom_and_cyrb53_reference_values() -> None:
    # seedrandom's documented example: Math.seedrandom('hello.') -> 0.9282578795792454
    assert Arc4Random("hello.").random() == 0.9282578795792454
    assert string_hash(None) == 0
    assert string_hash("a") != string_hash("b")
    assert string_hash("😀") == string_hash(
        "\ud83d\ude00".encode("utf-16", "surrogatepass").decode("utf-16")
    )


def test_env_from_chat_state() -> None:
    state = {
        "character": {"data": {"name": "Wren", "description": "A bird", "first_mes": "Hi"}},
        "persona": {"name": "Ann", "description": "curious"},
        "messages": [
            {"mes": "Hi", "is_user": False},
            {"mes": "Hello", "is_user": True},
            {"mes": "sys", "is_user": False, "is_system": True},
        ],
        "chat": {"id": "c9", "metadata": {"chat_id_hash": 42}},
        "profile": {"model": "m", "source": "openai"},
    }
    env = env_from_chat_state(state, input="now")
    text = "{{user}}/{{char}}/{{description}}/{{lastMessage}}/{{lastCharMessage}}/{{input}}"
    assert substitute_macros(text, env) == "Ann/Wren/A bird/Hello/Hi/now"
    assert env.chat_id_hash == 42 and env.message_count == 3
