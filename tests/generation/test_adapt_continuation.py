"""Per-attempt context adaptation and the continuation pieces (echo strip, prefill, guard)."""

from __future__ import annotations

from dataclasses import replace
from io import StringIO

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from tavernkit.errors import ContextTooLong
from tavernkit.generation.attempt.chat_prompt import (
    ReplyLimits,
    TurnBlock,
    TurnPrompt,
    adapt_request,
    clamp_max_tokens,
)
from tavernkit.generation.continuation import (
    ClauseBuffer,
    ContinuationConfig,
    EchoStripper,
    SpeakerGuard,
    TextPipe,
    join_gap,
    plan_prefill,
)
from tavernkit.generation.result import FallbackNotice, NoticeFailure, TurnError, TurnResult
from tavernkit.generation.sink import ConsoleSink, ErrorEvent, NoticeEvent, ToolEvent
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.providers.profiles import FAMILY_DEFAULTS
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    MessageLabel,
    Sampling,
    WireImagePart,
    WireTextPart,
)


class Words:
    """One token per word, so budgets are easy to read."""

    def count(self, text: str) -> int:
        return len(text.split())


def profile(**kw):
    return replace(FAMILY_DEFAULTS["openai"], model="m", **kw)


def history(n: int) -> tuple[TurnBlock, ...]:
    return tuple(
        TurnBlock(
            ChatMessage("user" if i % 2 == 0 else "assistant", f"message number {i}"), history=True
        )
        for i in range(n)
    )


PROMPT = TurnPrompt(
    (
        TurnBlock(ChatMessage("system", "system prompt here")),
        TurnBlock(ChatMessage("system", "use the memory tool"), requires_tool_calling=True),
        *history(10),
        TurnBlock(ChatMessage("user", "the trigger message"), history=True, protected=True),
    ),
    sampling=Sampling(max_tokens=20, temperature=0.7),
)


def test_history_is_retrimmed_from_the_untrimmed_original() -> None:
    small = adapt_request(PROMPT, profile(context_window=80), Words())
    big = adapt_request(PROMPT, profile(context_window=1000), Words())
    # budget 80 - 20 reserve = 60; every block costs words + 4
    assert small.dropped_history > 0 and big.dropped_history == 0
    assert small.request.messages[-1].content == "the trigger message"
    assert small.request.messages[0].content == "system prompt here"
    kept = [m.content for m in small.request.messages]
    assert kept[-2] == "message number 9"  # newest history survives, oldest goes first
    assert len(big.request.messages) == len(PROMPT.blocks)


def _labelled(role: str, text: str, kind: str, tool_only: bool = False) -> ChatMessage:
    return ChatMessage(role, text, label=MessageLabel(kind=kind, tool_only=tool_only))  # type: ignore[arg-type]


def test_labels_decide_what_a_window_drops_and_what_a_model_without_tools_gets() -> None:
    labelled = ChatPrompt(
        (
            _labelled("system", "main prompt", "preset"),
            _labelled("user", "an injection at depth ninety nine", "injection"),
            _labelled("user", "oldest chat message one", "history"),
            _labelled("assistant", "", "tool", tool_only=True),
            _labelled("tool", "four", "tool", tool_only=True),
            _labelled("assistant", "an older reply two", "history"),
            _labelled("user", "the trigger message", "history"),
            _labelled("assistant", "an author's note in chat", "extension"),
            _labelled("assistant", "the reply being continued", "history"),
        ),
        sampling=Sampling(max_tokens=20),
    )
    prompt = TurnPrompt.from_chat_prompt(labelled)
    assert [b.history for b in prompt.blocks] == [0, 0, 1, 1, 1, 1, 1, 0, 1]
    # the trigger and the continued reply are protected
    assert [b.protected for b in prompt.blocks] == [0, 0, 0, 0, 0, 0, 1, 0, 1]
    assert [b.requires_tool_calling for b in prompt.blocks] == [0, 0, 0, 1, 1, 0, 0, 0, 0]
    # a window (20 reserved) for what must stay: 6 + 10 + 7 + 9 + 8 tokens (words + 4)
    tight = adapt_request(prompt, profile(context_window=20 + 40), Words())
    assert [m.text() for m in tight.request.messages] == [
        "main prompt",
        "an injection at depth ninety nine",
        "the trigger message",
        "an author's note in chat",
        "the reply being continued",
    ]
    assert tight.dropped_history == 4
    no_tools = adapt_request(prompt, profile(supports_tools=False), Words())
    assert no_tools.dropped_tool_blocks == 2
    assert [m.role for m in no_tools.request.messages].count("tool") == 0
    # a request nobody labelled keeps the old guess: every non-system message is history
    guessed = TurnPrompt.from_chat_prompt(
        ChatPrompt(tuple(replace(m, label=None) for m in labelled.messages))
    )
    assert [b.history for b in guessed.blocks] == [0, 1, 1, 1, 1, 1, 1, 1, 1]


def test_prefill_tokens_are_reserved_but_not_trimmed_as_history() -> None:
    tail = [ChatMessage("user", "[System: " + "word " * 10 + "]")]
    without = adapt_request(PROMPT, profile(context_window=100), Words())
    with_tail = adapt_request(PROMPT, profile(context_window=100), Words(), tail=tail)
    assert with_tail.budget == without.budget - 16  # 12 words + 4 framing
    assert with_tail.dropped_history > without.dropped_history
    assert with_tail.request.messages[-1] == tail[0]
    assert with_tail.request.messages[-2].content == "the trigger message"


def test_context_too_long_when_even_fixed_blocks_do_not_fit() -> None:
    with pytest.raises(ContextTooLong):
        adapt_request(PROMPT, profile(context_window=30), Words())


def test_tool_blocks_dropped_without_tools() -> None:
    on = adapt_request(PROMPT, profile(supports_tools=True), Words())
    off = adapt_request(PROMPT, profile(supports_tools=True), Words(), tools_enabled=False)
    blind = adapt_request(PROMPT, profile(supports_tools=False), Words())
    assert on.dropped_tool_blocks == 0
    assert off.dropped_tool_blocks == blind.dropped_tool_blocks == 1
    assert all(m.content != "use the memory tool" for m in off.request.messages)


def test_images_downgraded_for_blind_models() -> None:
    image = ChatMessage("user", (WireTextPart("look"), WireImagePart(url="https://x/y.png")))
    prompt = TurnPrompt((TurnBlock(image, history=True, protected=True),))
    blind = adapt_request(prompt, profile(supports_vision=False), Words())
    seeing = adapt_request(prompt, profile(supports_vision=True), Words())
    assert blind.request.messages[0].content == (WireTextPart("look"), WireTextPart("[image]"))
    assert blind.downgrades == ("image replaced by a text placeholder",)
    assert seeing.request.messages[0].has_images() and not seeing.downgrades


def test_samplers_and_output_limit_clamp() -> None:
    saved = {"temperature": 1.1, "top_p": None, "max_tokens": 9000, "unknown": 1}
    adapted = adapt_request(
        PROMPT, profile(max_output_tokens=4096), Words(), limits=ReplyLimits(samplers=saved)
    )
    assert adapted.request.sampling.temperature == 1.1
    assert adapted.request.sampling.max_tokens == 4096  # the server's 9000 clamps
    user = adapt_request(
        PROMPT,
        profile(max_output_tokens=4096),
        Words(),
        limits=ReplyLimits(samplers=saved, user_max_tokens=300),
    )
    assert user.request.sampling.max_tokens == 300
    assert clamp_max_tokens(None, None, 100) is None
    assert clamp_max_tokens(50, None, 100) == 50 and clamp_max_tokens(50, 500, 100) == 100


def test_an_adapter_may_own_the_fitting() -> None:
    seen = {}

    def fitter(blocks, budget, model):
        seen["n"], seen["budget"] = len(blocks), budget
        return blocks[-2:]

    adapted = adapt_request(PROMPT, profile(context_window=50), Words(), fitter=fitter)
    assert seen["n"] == len(PROMPT.blocks) - 0 and len(adapted.request.messages) == 2


def test_turn_prompt_from_blocks_and_chat_prompt() -> None:
    class Block:
        def __init__(self, message, source, tool=False):
            self.message, self.source, self.requires_tool_calling = message, source, tool

    blocks = [
        Block({"role": "system", "content": "sys"}, "preset"),
        Block(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": "u"}},
                ],
            },
            "history",
        ),
        Block({"role": "assistant", "content": None}, "history"),
        Block({"role": "user", "content": "go"}, "history"),
        Block({"role": "system", "content": "memory"}, "extension", True),
    ]
    prompt = TurnPrompt.from_blocks(blocks, prefill="Hm")
    assert [b.history for b in prompt.blocks] == [False, True, True, True, False]
    assert [b.protected for b in prompt.blocks] == [False, False, False, True, False]
    assert prompt.blocks[4].requires_tool_calling and prompt.prefill == "Hm"
    assert prompt.blocks[1].message.content == (WireTextPart("hi"), WireImagePart(url="u"))
    chat = TurnPrompt.from_chat_prompt(
        ChatPrompt((ChatMessage("system", "s"), ChatMessage("user", "u")))
    )
    assert chat.blocks[1].protected and not chat.blocks[0].history


# -- continuation -----------------------------------------------------------------------------


@given(st.text(min_size=1), st.text(), st.lists(st.integers(1, 7), min_size=1))
def test_echo_strip_is_exact_across_any_chunking(carried: str, rest: str, sizes: list[int]) -> None:
    output = carried + rest
    stripper = EchoStripper(carried)
    out, i, n = [], 0, 0
    while i < len(output):
        size = sizes[n % len(sizes)]
        out.append(stripper.feed(output[i : i + size]))
        i += size
        n += 1
    out.append(stripper.finish())
    assert "".join(out) == rest


@given(st.text(min_size=1), st.text(min_size=1), st.lists(st.integers(1, 5), min_size=1))
def test_echo_strip_keeps_every_character_of_a_non_echo(
    carried: str, output: str, sizes: list[int]
) -> None:
    stripper = EchoStripper(carried)
    out, i, n = [], 0, 0
    while i < len(output):
        out.append(stripper.feed(output[i : i + sizes[n % len(sizes)]]))
        i += sizes[n % len(sizes)]
        n += 1
    out.append(stripper.finish())
    expected = output[len(carried) :] if output.startswith(carried) else output
    assert "".join(out) == expected


@given(st.lists(st.text(), max_size=8))
def test_clause_buffer_loses_nothing(pieces: list[str]) -> None:
    buffer = ClauseBuffer()
    out = [buffer.push(p) for p in pieces]
    out.append(buffer.take())
    assert "".join(out) == "".join(pieces)


def test_clause_buffer_releases_whole_clauses() -> None:
    buffer = ClauseBuffer()
    assert buffer.push("He said") == ""
    assert buffer.push(' "go." Then') == 'He said "go."'
    assert buffer.pending == " Then"


def test_prefill_plans() -> None:
    config = ContinuationConfig()
    carried_native = plan_prefill("Done so far.", "Sure,", supports_prefill=True, config=config)
    assert (carried_native.mode, carried_native.source, carried_native.sent) == (
        "native",
        "carried",
        True,
    )
    assert carried_native.message == ChatMessage("assistant", "Done so far.")
    carried_tail = plan_prefill("Done {x}.", "", supports_prefill=False, config=config)
    assert carried_tail.message is not None and carried_tail.message.role == "user"
    assert "Done {x}." in carried_tail.message.text()
    assert carried_tail.message.text().startswith("[System: ")
    manual = plan_prefill("", "  Sure, ", supports_prefill=False, config=config)
    assert manual.source == "manual" and 'Begin your next reply with: "Sure,"' in manual.directive
    off = plan_prefill("x", "y", supports_prefill=True, config=ContinuationConfig(enabled=False))
    assert off.mode == "none"
    assert plan_prefill("", "", supports_prefill=True, config=config).mode == "none"


def test_join_gap_only_after_sentences() -> None:
    assert join_gap("He left.", "Then") == " "
    assert join_gap("He le", "ft.") == ""
    assert join_gap("He left.", " Then") == ""


def test_speaker_guard() -> None:
    guard = SpeakerGuard(["Alex", "Alexander"])
    assert guard.decide_start("Ale") == "undecided"
    assert guard.decide_start("Alexander: hi") == "wrong"
    assert guard.decide_start("Mira looks up.") == "ok"
    assert guard.cut("Mira waves.\nAlex: hey") == 11
    assert SpeakerGuard([]).decide_start("Alex: x") == "ok"


def test_text_pipe_shows_manual_prefill_once() -> None:
    plan = plan_prefill("", "Sure,", supports_prefill=True, config=ContinuationConfig())
    pipe = TextPipe(plan, carried="", guard=SpeakerGuard([]), segment="delta")
    assert pipe.feed(" I will.") == "Sure, I will."
    assert pipe.feed(" Then more.") == " Then more."
    assert pipe.visible == "Sure, I will. Then more."


# -- console sink -----------------------------------------------------------------------------


async def test_console_sink_prints_a_turn() -> None:
    out = StringIO()
    sink = ConsoleSink(Console(file=out, width=100, color_system=None), show_reasoning=True)
    await sink.emit(ReasoningDelta("thinking"))
    await sink.emit(TextDelta("Hello"))
    await sink.emit(ToolEvent("roll", "Rolling a d20", replayed=True))
    await sink.emit(
        NoticeEvent(FallbackNotice("m2", 1, (NoticeFailure(0, "m1", "rate_limit", "429"),)))
    )
    await sink.emit(ErrorEvent(TurnError("overloaded", "500", "m2")))
    await sink.flush()
    await sink.finalize(TurnResult("completed", "Hello"))
    await sink.cleanup()
    text = out.getvalue()
    assert "thinking" in text and "Hello" in text and "Rolling a d20 (reused)" in text
    assert "1. m1: rate_limit (429)" in text and "overloaded (500)" in text
