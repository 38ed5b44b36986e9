"""The fault matrix: every upstream fault x {one key, rotation, fallback, continuation after a cut},
through ``Tavern`` and ``ChatService`` against a scripted OpenAI-compatible upstream on loopback.

Each case asserts from the store and from the upstream's record: the user's message is stored
once, the stored reply is exactly what the user saw (delivered text plus its continuation), the
number of requests is the bound the runner promises, a key that failed rests for its error
class's cooldown on the model that failed (the next turn starts on another key), and nothing
shown or stored (errors, notices, the message) carries a key or the provider's
error text. Timeouts are the profile's own (0.3 s to the first byte, 0.2 s idle).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tavernkit.chat import TurnOutcome
from tavernkit.generation.sink import RecordingSink

from ._bench import SECRETS, USER_TEXT, Bench, MakeBench, make_bench
from ._upstream import (
    Reply,
    error,
    hang,
    malformed_sse,
    openai_error,
    openai_stream,
    openai_stream_error,
)

__all__ = ["make_bench"]  # the fixtures of this module

PRIVATE = "PRIVATE-PLOT-TEXT"  # what a provider's error body echoes back of the prompt
HEAD = "The tide turns. "
MORE = "It rises. "
TAIL = "At nine it runs out."


def _http_date(seconds_ahead: float) -> str:
    return email.utils.formatdate(time.time() + seconds_ahead, usegmt=True)


@dataclass(frozen=True)
class Fault:
    name: str
    make: Callable[[list[str]], Reply]
    error_class: str
    #: the text this fault delivers before it breaks (its ``pieces`` when it has any)
    delivers: bool = False
    #: the rest (s) the key gets for the model, ``None``: none (a timeout, an empty reply)
    cooldown: float | None = None

    @property
    def timeout(self) -> bool:
        return self.error_class == "timeout"

    @property
    def rotates(self) -> bool:
        return not self.timeout and self.error_class != "empty_response"


def _text(pieces: list[str]) -> Reply:
    return openai_stream(pieces)


FAULTS = [
    Fault(
        "401",
        lambda _: openai_error(
            401, "invalid_request_error", "invalid_api_key", message=f"bad key {SECRETS[0]}"
        ),
        "auth",
        cooldown=300,
    ),
    Fault(
        "403",
        lambda _: openai_error(403, "permission_error", message=PRIVATE),
        "auth",
        cooldown=300,
    ),
    Fault(
        "429-seconds",
        lambda _: openai_error(429, "rate_limit_error", "rate_limit_exceeded", retry_after="90"),
        "rate_limit",
        cooldown=90,
    ),
    Fault(
        "429-date",
        lambda _: openai_error(429, "rate_limit_error", retry_after=_http_date(120)),
        "rate_limit",
        cooldown=120,
    ),
    Fault("500", lambda _: error(500, PRIVATE), "overloaded", cooldown=300),
    Fault(
        "503",
        lambda _: openai_error(503, "server_error", message=PRIVATE),
        "overloaded",
        cooldown=300,
    ),
    Fault(
        "529",
        lambda _: openai_error(529, "overloaded_error", message=PRIVATE),
        "overloaded",
        cooldown=300,
    ),
    Fault("hang-before-headers", lambda _: hang(), "timeout"),
    Fault("hang-mid-stream", lambda p: openai_stream(p, hang=True), "timeout", delivers=True),
    Fault("tcp-cut", lambda p: openai_stream(p, cut=True), "network", True, 300),
    Fault("malformed-sse", malformed_sse, "protocol", delivers=True, cooldown=300),
    Fault("in-stream-error", openai_stream_error, "overloaded", delivers=True, cooldown=300),
    Fault("empty", lambda _: openai_stream([]), "empty_response"),
]
FAULTS_BY_NAME = {f.name: f for f in FAULTS}


async def _check_stored(bench: Bench, sink: RecordingSink, out: TurnOutcome) -> None:
    """What holds in every case: one user message, the stored reply is what was shown, and
    no secret or provider text anywhere the user or the store can see."""
    messages = await bench.messages()
    assert [m.mes for m in messages if m.is_user] == [USER_TEXT]
    replies = [m for m in messages[1:] if not m.is_user]
    if sink.text:
        (reply,) = replies
        assert reply.mes == sink.text == out.text
    else:
        assert replies == []
    visible = [
        json.dumps([m.to_wire() for m in messages]),
        *(e.text() for e in sink.errors),
        *(n.text() for n in sink.notices),
    ]
    for text in visible:
        for secret in (*SECRETS, PRIVATE):
            assert secret not in text


def _assert_cooled(fault: Fault, left: float | None) -> None:
    if fault.cooldown is None:
        assert left is None
    else:
        assert left is not None and fault.cooldown - 3 <= left <= fault.cooldown + 1


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_one_key(fault: Fault, make_bench: MakeBench) -> None:
    bench = await make_bench(keys=1, chain=False)
    script = [fault.make([HEAD])]
    if fault.error_class == "empty_response":
        script.append(fault.make([HEAD]))  # an empty reply is asked again once, same key
    bench.upstream.add(*script)
    out, sink = await bench.send()
    assert out.status == "failed"
    assert [e.error_class for e in sink.errors] == [fault.error_class]
    assert len(bench.upstream.requests) == len(script)
    assert sink.text == (HEAD if fault.delivers else "")
    await _check_stored(bench, sink, out)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_rotation(fault: Fault, make_bench: MakeBench) -> None:
    bench = await make_bench(keys=2, chain=False)
    bench.upstream.add(fault.make([HEAD]), _text([TAIL] if fault.delivers else [HEAD, TAIL]))
    out, sink = await bench.send()
    if fault.timeout:
        # a slow model is not a bad key: no rotation, no cooldown, the turn fails
        assert out.status == "failed"
        assert bench.keys == [SECRETS[0]]
        # a suppressed failure takes back its unfinished clause (here the trailing space)
        assert sink.text == (HEAD.rstrip() if fault.delivers else "")
    else:
        assert out.status == "completed", sink.errors
        assert sink.text == HEAD + TAIL and not sink.errors and not sink.notices
        second = SECRETS[0] if fault.error_class == "empty_response" else SECRETS[1]
        assert bench.keys == [SECRETS[0], second]
    _assert_cooled(fault, await bench.cooldown(bench.key_ids[0]))
    assert await bench.cooldown(bench.key_ids[1]) is None
    await _check_stored(bench, sink, out)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_fallback(fault: Fault, make_bench: MakeBench) -> None:
    bench = await make_bench(keys=1, chain=True)
    script = [fault.make([HEAD])]
    if fault.error_class == "empty_response":
        script.append(fault.make([HEAD]))
    bench.upstream.add(*script, _text([TAIL] if fault.delivers else [HEAD, TAIL]))
    out, sink = await bench.send()
    assert out.status == "completed", sink.errors
    assert sink.text == HEAD + TAIL and not sink.errors
    assert bench.models == ["m1"] * len(script) + ["m2"]
    (notice,) = sink.notices
    assert notice.model == "m2" and [f.error_class for f in notice.failures] == [fault.error_class]
    *_, reply = await bench.messages()
    stored = reply.to_wire()["extra"]["extensions"]["fallback_notice"]
    assert stored["model"] == "m2" and stored["failures"][0]["class"] == fault.error_class
    await _check_stored(bench, sink, out)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_continuation_after_a_cut(fault: Fault, make_bench: MakeBench) -> None:
    """Key 1's stream is cut after ``HEAD``; key 2 meets the fault; the fallback model (on the
    same keys) continues. Whatever happened in between, the reply reads on without a seam."""
    bench = await make_bench(keys=2, chain=True)
    bench.upstream.add(openai_stream([HEAD], cut=True), fault.make([MORE]), _text([TAIL]))
    out, sink = await bench.send()
    assert out.status == "completed", sink.errors
    if fault.error_class == "empty_response":
        # an empty continuation: what was carried is the whole reply; no third request
        assert sink.text == HEAD.rstrip() and len(bench.upstream.requests) == 2
        assert sink.notices == []
    else:
        assert sink.text == HEAD + (MORE if fault.delivers else "") + TAIL
        assert bench.models == ["m1", "m1", "m2"]
        assert bench.keys[:2] == list(SECRETS)
        # the cut rests key 1 for m1, the fault key 2 (unless a timeout); for m2 neither
        # rests, so the fallback starts on the first key
        _assert_cooled(FAULTS_BY_NAME["tcp-cut"], await bench.cooldown(bench.key_ids[0]))
        _assert_cooled(fault, await bench.cooldown(bench.key_ids[1]))
        assert bench.keys[2] == SECRETS[0]
        for key_id in bench.key_ids:
            assert await bench.cooldown(key_id, "m2") is None
        # every request after the cut carried the text shown so far
        for request in bench.upstream.requests[1:]:
            last = request.messages[-1]
            assert last["role"] == "assistant" and last["content"].startswith(HEAD.rstrip())
    await _check_stored(bench, sink, out)


class StepClock:
    """The key clock of a chat service: epoch seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "fault", [f for f in FAULTS if f.rotates or f.timeout], ids=lambda f: f.name
)
async def test_the_next_turn_starts_on_another_key_while_one_rests(
    fault: Fault, make_bench: MakeBench
) -> None:
    """Key 1 meets the fault and key 2 answers. Until key 1's rest is over, every turn starts
    on key 2 (key 1 is the least used: a failure credits nothing); then key 1 serves again.
    A timeout rests nothing: the next turn starts on key 1 again."""
    bench = await make_bench(keys=2, chain=False)
    clock = StepClock()
    chats = bench.service(key_clock=clock)
    first = _text([TAIL] if fault.delivers else [HEAD, TAIL])
    bench.upstream.add(fault.make([HEAD]), first, *[_text(["Again."]) for _ in range(3)])
    out, _ = await bench.send(chats)
    assert out.status == ("failed" if fault.timeout else "completed")
    if fault.timeout:
        await bench.send(chats)
        assert bench.keys == [SECRETS[0], SECRETS[0]]
        assert await bench.cooldown(bench.key_ids[0], now=clock.now) is None
        return
    assert fault.cooldown is not None
    assert bench.keys == list(SECRETS)
    left = await bench.cooldown(bench.key_ids[0], now=clock.now)
    assert left is not None and fault.cooldown - 3 <= left <= fault.cooldown + 1
    await bench.send(chats)
    assert bench.keys[2] == SECRETS[1]  # key 1 rests
    clock.now += left - 1
    await bench.send(chats)
    assert bench.keys[3] == SECRETS[1]  # still resting a second before the end
    clock.now += 2
    await bench.send(chats)
    assert bench.keys[4] == SECRETS[0]  # rested: the least used key serves again
