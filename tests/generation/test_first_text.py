"""The first visible text is not held back: a reply shows as it arrives, and only what a failed
attempt carries into its continuation keeps the clause rule (its unfinished tail is taken back
and written again by the continuation, so it is shown once)."""

from __future__ import annotations

import asyncio

import pytest

from tavernkit.generation.continuation import PrefillPlan, SpeakerGuard, TextPipe
from tavernkit.generation.sink import ErrorEvent, RecordingSink, SinkEvent, WithdrawEvent
from tavernkit.providers.events import TextDelta
from tavernkit.providers.http import Timeouts

from ._harness import Route, World
from ._upstream import openai_stream
from .test_turn_faults import turn

pytestmark = pytest.mark.usefixtures("no_gc_pauses")

NO_PREFILL = PrefillPlan("none", "none")


def test_a_piece_shows_as_it_arrives_mid_clause() -> None:
    pipe = TextPipe(NO_PREFILL, carried="", guard=SpeakerGuard(["Ada"]))
    # shorter than "Ada:": the speaker guard cannot decide yet, and it shows all the same
    assert pipe.feed("The") == "The"
    assert pipe.feed(" tide rises") == " tide rises"
    assert pipe.feed(". And") == ". And"
    assert pipe.finish() == ""  # nothing was held back
    assert pipe.visible == "The tide rises. And"


def test_a_start_that_is_the_users_is_taken_back() -> None:
    pipe = TextPipe(NO_PREFILL, carried="", guard=SpeakerGuard(["Ada"]))
    assert pipe.feed("Ad") == "Ad"
    assert pipe.feed("a: I go.") == ""
    assert pipe.wrong_speaker and pipe.take_withdrawn() == "Ad"


def test_a_failed_attempt_takes_back_its_unfinished_clause_only() -> None:
    pipe = TextPipe(NO_PREFILL, carried="", guard=SpeakerGuard([]))
    shown = pipe.feed("Hello there. ") + pipe.feed('He said "go') + pipe.feed('." Then the')
    assert shown == 'Hello there. He said "go." Then the'
    assert pipe.abandon() == "" and pipe.take_withdrawn() == " Then the"


async def test_the_first_piece_reaches_the_sink_before_the_stream_goes_on(world: World) -> None:
    """The upstream sends one piece mid-sentence and then nothing: the piece is shown at once,
    not when the stream ends (the idle timeout) as a held clause was."""
    world.timeouts = Timeouts(first_byte=5, idle=0.6)
    loop = asyncio.get_running_loop()
    times: list[tuple[SinkEvent, float]] = []

    async def note(event: SinkEvent) -> None:
        times.append((event, loop.time()))

    world.upstream.add(openai_stream(["The", " tide rises and"], hang=True))
    result, sink = await turn(
        world, world.plan([Route("gpt-4o")]), sink=RecordingSink(before_emit=note)
    )
    assert result.status == "failed"
    texts = [(e.text, t) for e, t in times if isinstance(e, TextDelta)]
    failed_at = next(t for e, t in times if isinstance(e, ErrorEvent))
    assert texts[0][0] == "The"
    assert failed_at - texts[0][1] >= 0.4  # shown while the stream was still open
    # the last attempt's error is visible: what was shown stays, and is the turn's text
    assert result.text == sink.text == "The tide rises and"
    assert not sink.withdrawn


async def test_a_wrong_speaker_start_is_shown_then_taken_back(world: World) -> None:
    world.upstream.add(
        openai_stream(["Ad", "a: I open the door."]), openai_stream(["Mira smiles."])
    )
    result, sink = await turn(
        world, world.plan([Route("gpt-4o")]), user_names=("Ada",), char_name="Mira"
    )
    assert isinstance(sink.events[0], TextDelta) and sink.events[0].text == "Ad"
    assert sink.events[1] == WithdrawEvent("Ad")
    assert result.text == sink.text == "Mira smiles."


async def test_a_cut_attempts_tail_is_taken_back_and_written_once(world: World) -> None:
    world.upstream.add(
        openai_stream(["The tide turns. ", "It ri"], cut=True),
        openai_stream([" It rises."]),
    )
    result, sink = await turn(world, world.plan([Route("gpt-4o"), Route("gpt-4o-mini")]))
    assert [e.text for e in sink.events if isinstance(e, TextDelta)][:2] == [
        "The tide turns. ",
        "It ri",
    ]
    assert sink.withdrawn == [" It ri"]
    # the continuation follows the last whole clause, and the tail is shown once
    assert world.upstream.requests[1].body["messages"][-1]["content"] == "The tide turns."
    assert result.text == sink.text == "The tide turns. It rises."
