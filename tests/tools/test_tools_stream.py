"""The streaming detector: any chunking shows the same text and yields the same calls."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tavernkit.tools import JsonProtocol, StreamDetector, XmlProtocol, split_at_trigger

from ._fixtures import TOOLS, TRIGGER

XML = XmlProtocol(TRIGGER)
JSON = JsonProtocol(TRIGGER)


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def run(text: str, cuts: list[int], trigger: str = TRIGGER) -> tuple[str, StreamDetector]:
    det = StreamDetector(trigger)
    shown = "".join(det.feed(c) for c in chunked(text, cuts))
    shown += det.finish()
    return shown, det


REPLIES = [
    "Plain answer, no tools at all. <thi",
    "Hmm <think>maybe " + TRIGGER + " here?</think> no call after all <Function_",
    "Let me search.\n" + XML.render_calls([("search_web", {"query": "cats & <dogs>"})]),
    "<THINK>plan: "
    + TRIGGER
    + "</THINK>\nOK.\n"
    + JSON.render_calls([("take-note", {"text": "x"}), ("search_web", {"query": "y"})]),
    "<Function_Ab12_Sta" + "rt/ almost, but not the trigger",
    "<thought><think>"
    + TRIGGER
    + "</think>"
    + TRIGGER
    + "</thought>"
    + TRIGGER
    + "\n"
    + "<function_calls>\n<function_call>\n<tool>search_web</tool>\n"
    '<args_json><![CDATA[{"query": "z"}]]></args_json>\n</function_call>\n</function_calls>',
]


@pytest.mark.parametrize("text", REPLIES)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
@settings(max_examples=60, deadline=None)
def test_any_chunking_same_visible_text_and_calls(text: str, cuts: list[int]) -> None:
    shown, det = run(text, cuts)
    visible, payload = split_at_trigger(text, TRIGGER)
    assert shown == visible == det.visible_text
    assert det.triggered is (payload is not None)
    assert det.raw_text == text
    assert det.visible_text + det.hidden_text == text
    if payload is not None:
        proto = JSON if "```json" in payload else XML
        whole = proto.parse(text, TOOLS)
        streamed = proto.parse(det.raw_text, TOOLS)
        assert [(c.name, c.args) for c in streamed.calls] == [(c.name, c.args) for c in whole.calls]
        assert whole.calls


@given(
    before=st.text(alphabet="ab <>/_FunctionStarthink\n", max_size=40),
    after=st.text(max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=20),
    with_trigger=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_random_text_matches_the_batch_split(
    before: str, after: str, cuts: list[int], with_trigger: bool
) -> None:
    text = before + (TRIGGER if with_trigger else "") + after
    shown, det = run(text, cuts)
    visible, payload = split_at_trigger(text, TRIGGER)
    assert shown == visible
    assert det.hidden_text == ("" if payload is None else TRIGGER + payload)


def test_split_trigger_is_held_back_then_hidden() -> None:
    det = StreamDetector(TRIGGER)
    assert det.feed("Sure.\n<Func") == "Sure.\n"
    assert det.feed("tion_Ab12_St") == ""
    assert det.feed("art/>\n<function_calls>") == ""
    assert det.triggered
    assert det.feed("more payload") == ""
    assert det.finish() == ""
    assert det.hidden_text.startswith(TRIGGER)


def test_false_alarm_is_released() -> None:
    det = StreamDetector(TRIGGER)
    assert det.feed("a <Function_Ab") == "a "
    assert det.feed("cd") == "<Function_Abcd"
    assert det.feed("<thi") == ""
    assert det.finish() == "<thi"


def test_reasoning_tags_pass_through_and_guard_the_trigger() -> None:
    det = StreamDetector(TRIGGER)
    out = det.feed("<think>" + TRIGGER) + det.feed("</think>ok")
    assert out == "<think>" + TRIGGER + "</think>ok"
    assert not det.triggered


def test_feed_after_finish_and_empty_trigger() -> None:
    det = StreamDetector(TRIGGER)
    det.finish()
    with pytest.raises(RuntimeError):
        det.feed("x")
    with pytest.raises(ValueError):
        StreamDetector("")
    assert isinstance(XML.detector(), StreamDetector)
