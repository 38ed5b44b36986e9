"""The SSE decoder: framing rules, and chunking never changes the events (hypothesis)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tavernkit.errors import ProtocolError
from tavernkit.providers.sse import SSEDecoder, SSEEvent


def decode(data: bytes, cuts: list[int] | None = None) -> tuple[list[SSEEvent], int]:
    decoder = SSEDecoder()
    points = sorted({c % (len(data) + 1) for c in cuts or []} | {0, len(data)})
    events: list[SSEEvent] = []
    for a, b in itertools.pairwise(points):
        events += decoder.feed(data[a:b])
    events += decoder.flush()
    return events, decoder.comments


def test_lf_crlf_and_cr_line_ends_are_equivalent() -> None:
    for sep in (b"\n", b"\r\n", b"\r"):
        body = sep.join([b"event: ping", b"data: a", b"", b"data: b", b"", b""])
        events, _ = decode(body)
        assert events == [SSEEvent("a", "ping"), SSEEvent("b")]


def test_mixed_line_endings_in_one_stream() -> None:
    events, _ = decode(b"data: 1\r\n\r\ndata: 2\n\ndata: 3\r\rdata: 4\n\r\n")
    assert [e.data for e in events] == ["1", "2", "3", "4"]


def test_comments_are_counted_and_produce_nothing() -> None:
    events, comments = decode(b": OPENROUTER PROCESSING\n\n: ping\ndata: x\n\n")
    assert events == [SSEEvent("x")]
    assert comments == 2


def test_multi_line_data_is_joined_with_newlines() -> None:
    events, _ = decode(b'data: {\ndata:  "a": 1\ndata: }\n\n')
    assert events[0].data == '{\n "a": 1\n}'


def test_field_without_space_and_unknown_fields() -> None:
    events, _ = decode(b"data:x\nfoo: bar\nid: 7\nretry: 100\n\n")
    assert events == [SSEEvent("x", None, "7", 100)]


def test_event_without_data_is_not_dispatched() -> None:
    events, _ = decode(b"event: ping\n\ndata: y\n\n")
    assert events == [SSEEvent("y")]


def test_last_event_without_blank_line_is_flushed_at_eof() -> None:
    events, _ = decode(b"data: a\n\ndata: [DONE]")
    assert [e.data for e in events] == ["a", "[DONE]"]


def test_bom_is_dropped_even_when_split() -> None:
    events, _ = decode(b"\xef\xbb\xbfdata: a\n\n", [1, 2])
    assert events == [SSEEvent("a")]


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode(b"data: \xff\xfe\n\n")


def test_crlf_split_across_chunks_counts_once() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\r\n") == [SSEEvent("a")]


_field = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=20
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    events = draw(
        st.lists(st.tuples(st.one_of(st.none(), _field.filter(bool)), _field), max_size=8)
    )
    sep = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    out: list[str] = []
    expected: list[SSEEvent] = []
    for name, data in events:
        if draw(st.booleans()):
            out.append(": keep-alive" + sep)
        if name is not None:
            out.append(f"event: {name}{sep}")
        out.append(f"data: {data}{sep}{sep}")
        expected.append(SSEEvent(data, name))
    return "".join(out).encode(), expected


@given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_gives_the_same_events(
    stream: tuple[bytes, list[SSEEvent]], cuts: list[int]
) -> None:
    body, expected = stream
    assert decode(body, cuts)[0] == expected
    assert decode(body)[0] == expected


@given(st.text(min_size=1, max_size=200).filter(lambda s: "\r" not in s and "\n" not in s))
def test_multibyte_text_survives_byte_by_byte(text: str) -> None:
    body = f"data: {text}\n\n".encode()
    events, _ = decode(body, list(range(len(body))))
    assert [e.data for e in events] == [text]
