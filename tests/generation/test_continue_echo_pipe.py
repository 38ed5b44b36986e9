"""TextPipe's ``echo`` (the text a continued reply already holds): its leading copy is
stripped before the prefill's own echo, so a model that repeats the continued text, the
carried text, or both shows only what is new; a continued reply keeps its leading break."""

from __future__ import annotations

import pytest

from tavernkit.generation.continuation import (
    ContinuationConfig,
    SpeakerGuard,
    TextPipe,
    plan_prefill,
)


def _pipe(echo: str, carried: str = "") -> TextPipe:
    plan = plan_prefill(carried, "", supports_prefill=True, config=ContinuationConfig())
    return TextPipe(plan, carried=carried, guard=SpeakerGuard([]), segment="delta", echo=echo)


def _run(pipe: TextPipe, *chunks: str) -> str:
    return "".join(pipe.feed(c) for c in chunks) + pipe.finish()


@pytest.mark.parametrize(
    "chunks",
    [
        ("Old. New", " words", " more."),  # both echoed
        (" New words", " more."),  # only the carried text echoed
        ("Old.", " New words more."),  # echo of the continued text ends on a chunk boundary
    ],
)
def test_echoes_of_the_continued_and_the_carried_text_are_both_stripped(
    chunks: tuple[str, ...],
) -> None:
    assert _run(_pipe("Old.", carried=" New words"), *chunks) == " more."


def test_a_stream_ending_inside_the_echo_releases_what_it_held() -> None:
    assert _run(_pipe("Old. text"), "Old.", " te") == "Old. te"


def test_a_continued_reply_keeps_its_leading_break() -> None:
    assert _run(_pipe("Old."), "\n\n", "Next paragraph.") == "\n\nNext paragraph."
    assert _run(_pipe("Old."), "Old.", "\nNext.") == "\nNext."
