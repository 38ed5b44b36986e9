"""Inline ``<think>`` reasoning split off a stream, checked against the prompt module's
snapshot parser (SillyTavern's auto-parse rules) for every way of chunking the text."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.errors import Overloaded
from tavernkit.models.templates import ReasoningTemplate
from tavernkit.prompt.reasoning import ReasoningStreamParser
from tavernkit.providers.accumulator import Accumulator
from tavernkit.providers.events import (
    Finish,
    ProviderErrorEvent,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)
from tavernkit.providers.reasoning_stream import (
    TagReasoningParser,
    TagReasoningSplitter,
    split_tag_reasoning,
)

THINK = ReasoningTemplate()
DEEPSEEK = ReasoningTemplate(name="DeepSeek", prefix="<think>\n", suffix="\n</think>")
HARMONY = ReasoningTemplate(
    name="OpenAI Harmony",
    prefix="<|start|>assistant<|channel|>analysis<|message|>",
    suffix="<|start|>assistant<|channel|>final<|message|>",
    separator="",
)


def chunks_of(text: str, cuts: Sequence[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


def run(template: ReasoningTemplate, pieces: Sequence[str]) -> tuple[str, str]:
    parser = TagReasoningParser(template.prefix, template.suffix)
    reasoning: list[str] = []
    text: list[str] = []
    for piece in pieces:
        r, t = parser.feed(piece)
        reasoning.append(r)
        text.append(t)
    r, t = parser.finish()
    return "".join(reasoning) + r, "".join(text) + t


@pytest.mark.parametrize(
    ("template", "text", "reasoning", "reply"),
    [
        (THINK, "<think>plan it</think>\n\nHello there.", "plan it", "Hello there."),
        (THINK, "No reasoning here.", "", "No reasoning here."),
        (THINK, " <think>late</think>x", "", " <think>late</think>x"),
        (THINK, "<think>cut off mid-thought", "cut off mid-thought", ""),
        (THINK, "<think>only thinking</think>\n \n", "only thinking", ""),
        (THINK, "<thi", "", "<thi"),
        (THINK, "<think>a</thin", "a</thin", ""),
        (THINK, "<think>x</think>\n  indented", "x", "  indented"),
        (THINK, "<think>a</think>b</think>c", "a", "b</think>c"),
        (DEEPSEEK, "<think>\nstep 1\nstep 2\n</think>\n\nAnswer", "step 1\nstep 2", "Answer"),
        (HARMONY, HARMONY.prefix + "think" + HARMONY.suffix + "final", "think", "final"),
        (ReasoningTemplate(name="Blank", prefix="", suffix=""), "<think>a</think>b", "", None),
    ],
)
def test_split_examples(
    template: ReasoningTemplate, text: str, reasoning: str, reply: str | None
) -> None:
    expected_reply = text if reply is None else reply
    for size in (1, 2, 3, 7, len(text) or 1):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert run(template, pieces) == (reasoning, expected_reply), size


FRAGMENTS = ["<think>", "</think>", "<th", "</th", "ink>", "\n", " ", "a", "b", ">", "<"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=12),
    st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    st.sampled_from([THINK, DEEPSEEK]),
)
def test_matches_snapshot_parser(
    fragments: list[str], cuts: list[int], template: ReasoningTemplate
) -> None:
    """Deltas concatenated equal the snapshot parser's split of the text so far (a prefix of
    it while characters are held back) and all of it at the end."""
    text = "".join(fragments)
    pieces = chunks_of(text, cuts)
    parser = TagReasoningParser(template.prefix, template.suffix)
    oracle = ReasoningStreamParser(template)
    got_reasoning, got_text, received = "", "", ""
    for piece in pieces:
        r, t = parser.feed(piece)
        got_reasoning += r
        got_text += t
        received += piece
        snap = oracle.update(received)
        assert snap.reasoning.startswith(got_reasoning)
        assert snap.content.startswith(got_text)
    r, t = parser.finish()
    got_reasoning += r
    got_text += t
    final = oracle.update(text)
    held_prefix = oracle.state == "none" and template.prefix.startswith(text)
    # where the snapshot parser still waits for a prefix that never came, the stream shows
    # the text: it has ended, nothing more can complete the prefix
    assert got_reasoning == final.reasoning
    assert got_text == (text if held_prefix else final.content)


async def _aiter(events: Sequence[StreamEvent]) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


async def test_event_stream_split_and_order() -> None:
    events: list[StreamEvent] = [
        TextDelta("<thi"),
        TextDelta("nk>weigh"),
        TextDelta(" options</th"),
        TextDelta("ink>\n"),
        TextDelta("Hi"),
        TextDelta("!\n<"),
        Finish("stop", "stop"),
        Usage(input_tokens=3, output_tokens=9),
    ]
    out = [e async for e in split_tag_reasoning(_aiter(events), THINK)]
    assert out == [
        ReasoningDelta("weigh"),
        ReasoningDelta(" options"),
        TextDelta("Hi"),
        TextDelta("!\n<"),
        Finish("stop", "stop"),
        Usage(input_tokens=3, output_tokens=9),
    ]
    acc = Accumulator()
    for event in out:
        acc.feed(event)
    result = acc.result()
    assert (result.reasoning, result.text, result.finish_reason) == (
        "weigh options",
        "Hi!\n<",
        "stop",
    )


def test_held_text_released_before_finish_and_errors() -> None:
    splitter = TagReasoningSplitter(THINK)
    assert splitter.feed(TextDelta("<think>a</thi")) == [ReasoningDelta("a")]
    assert splitter.feed(Finish("length", "length")) == [
        ReasoningDelta("</thi"),
        Finish("length", "length"),
    ]
    splitter = TagReasoningSplitter(THINK)
    assert splitter.feed(TextDelta("<thin")) == []
    error = ProviderErrorEvent(Overloaded("busy"))
    assert splitter.feed(error) == [TextDelta("<thin"), error]


def test_choices_are_independent() -> None:
    splitter = TagReasoningSplitter(THINK)
    out = splitter.feed(TextDelta("<think>r0", 0))
    out += splitter.feed(TextDelta("plain", 1))
    out += splitter.feed(TextDelta("</think>t0", 0))
    assert out == [ReasoningDelta("r0"), TextDelta("plain", 1), TextDelta("t0", 0)]


def test_continue_inside_reasoning() -> None:
    parser = TagReasoningParser("<think>", "</think>", in_reasoning=True)
    assert parser.feed("more thought</think>reply") == ("more thought", "reply")


def test_text_after_reasoning_from_a_field_is_left_alone() -> None:
    # SillyTavern auto-parses only while no reasoning came in a field
    splitter = TagReasoningSplitter(THINK)
    out = splitter.feed(TextDelta("", 0))  # an empty piece is no text yet
    out += splitter.feed(ReasoningDelta("native", choice=0))
    out += splitter.feed(TextDelta("<think>x</think>y", 0))
    out += splitter.feed(TextDelta("<think>r</think>t", 1))  # choice 1 had none: parsed
    assert out == [
        ReasoningDelta("native", choice=0),
        TextDelta("<think>x</think>y", 0),
        ReasoningDelta("r", choice=1),
        TextDelta("t", 1),
    ]
    # a signature alone is no reasoning text: the text is still parsed
    splitter = TagReasoningSplitter(THINK)
    out = splitter.feed(ReasoningDelta(signature="sig"))
    out += splitter.feed(TextDelta("<think>r</think>t"))
    assert out == [ReasoningDelta(signature="sig"), ReasoningDelta("r"), TextDelta("t")]
