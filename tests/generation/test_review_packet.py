"""The reviewer's packet, verdict parsing, masking and the review lifecycle's limits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernkit.generation.review import (
    ContentSelection,
    Finding,
    ReviewConfig,
    ReviewerContext,
    ReviewEvidence,
    ReviewState,
    ReviewUnavailable,
    build_packet,
    contains_credential,
    mask_credentials,
    parse_verdict,
    redaction_needed,
    review_candidate,
)
from tavernkit.providers.profiles import FAMILY_DEFAULTS
from tavernkit.providers.request import ChatMessage, ToolSpec, WireImagePart, WireTextPart

EVIDENCE = ReviewEvidence(
    persona="Mira keeps the light.",
    trigger=ChatMessage(
        "user", (WireTextPart("look at this"), WireImagePart(url="https://x/a.png"))
    ),
    reply_target="Alex",
    history=tuple(ChatMessage("user", f"old message {i}") for i in range(30)),
    examples=("Mira: The sea is loud tonight.",),
    tools=(ToolSpec("roll", "Roll a die", {"type": "object", "properties": {"sides": {}}}),),
)


def test_packet_order_placeholders_and_coverage() -> None:
    packet = build_packet(
        EVIDENCE,
        "A reply.",
        findings=[Finding("voice", "p", "d")],
        tool_outcomes=[("roll", {"sides": 6}, "4")],
    )
    text = packet.text
    tags = [
        "<persona>",
        "<examples>",
        "<trigger",
        "<reply_target>",
        "<context>",
        "<tools>",
        "<candidate",
        "<findings>",
        "<tool_outcomes>",
    ]
    positions = [text.index(t) for t in tags]
    assert positions == sorted(positions)
    assert "look at this[image]" in text and "https://x/a.png" not in text
    assert packet.coverage[:4] == ("persona", "examples", "trigger", "reply_target")
    assert "recent:30/30" in packet.coverage and "tools" in packet.coverage
    assert text[: packet.stable_prefix].rstrip().endswith("</tools>")


def test_packet_budget_keeps_the_newest_context() -> None:
    packet = build_packet(EVIDENCE, "A reply.", limit_bytes=900)
    assert "old message 29" in packet.text and "old message 0<" not in packet.text
    assert packet.size <= 900
    with pytest.raises(ReviewUnavailable, match="packet_too_large"):
        build_packet(EVIDENCE, "x" * 2000, limit_bytes=900)


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        (ReviewEvidence(trigger=EVIDENCE.trigger, reply_target="A"), "missing_persona"),
        (ReviewEvidence(persona="p", reply_target="A"), "missing_trigger"),
        (ReviewEvidence(persona="p", trigger=EVIDENCE.trigger), "missing_reply_target"),
    ],
)
def test_missing_evidence_makes_review_unavailable(evidence: ReviewEvidence, reason: str) -> None:
    with pytest.raises(ReviewUnavailable, match=reason):
        build_packet(evidence, "A reply.")


def test_disabled_persona_selection_does_not_require_a_persona() -> None:
    evidence = ReviewEvidence(trigger=EVIDENCE.trigger, reply_target="A")
    packet = build_packet(evidence, "ok", selection=ContentSelection(persona=False))
    assert "<persona>" not in packet.text


def test_credentials_and_user_info() -> None:
    assert contains_credential("use sk-abcdefghijklmnopqrstuvwxyz please")
    assert contains_credential("AIza" + "x" * 35)
    assert not contains_credential("the key: the old brass one under the mat")
    with pytest.raises(ReviewUnavailable, match="candidate_contains_credential"):
        build_packet(EVIDENCE, "token ghp_" + "a" * 36)
    with pytest.raises(ReviewUnavailable, match="credential_redaction"):
        build_packet(EVIDENCE, "ok", tool_outcomes=[("login", {"password": "hunter2"}, "ok")])
    with pytest.raises(ReviewUnavailable, match="user_info_redaction"):
        build_packet(EVIDENCE, "ok", tool_outcomes=[("mail", {"email": "a@b.c"}, "sent")])
    assert redaction_needed({"query": "weather"}) is None
    assert mask_credentials({"q": 1, "api_key": "x", "nested": [{"Authorization": "y"}]}) == {
        "q": 1,
        "api_key": "***",
        "nested": [{"Authorization": "***"}],
    }


def test_outcomes_mask_credential_keys() -> None:
    packet = build_packet(
        EVIDENCE,
        "ok",
        tool_outcomes=[("fetch", {"url": "u"}, {"body": "b", "access_token": "zzz"})],
    )
    assert "zzz" not in packet.text and "'access_token': '***'" in packet.text


def test_linter_report_is_advisory_and_bounded() -> None:
    packet = build_packet(EVIDENCE, "ok", linter_report="L" * 40_000)
    assert '<prose_linter_report advisory="true">' in packet.text
    assert packet.text.count("L") <= 32 * 1024 + 10


def test_parse_verdict() -> None:
    assert parse_verdict('{"verdict": "pass", "findings": []}').result == "pass"
    revise = parse_verdict(
        json.dumps(
            {
                "verdict": "revise",
                "findings": [{"category": "voice", "problem": "p" * 400, "direction": "d"}],
            }
        )
    )
    assert revise.result == "revise" and len(revise.findings[0].problem) == 300
    for bad in (
        "nope",
        "[]",
        '{"verdict": "revise", "findings": []}',
        json.dumps(
            {
                "verdict": "revise",
                "findings": [{"category": "plot", "problem": "p", "direction": "d"}],
            }
        ),
        json.dumps(
            {
                "verdict": "revise",
                "findings": [{"category": "voice", "problem": "p", "direction": "d"}] * 5,
            }
        ),
    ):
        assert parse_verdict(bad).reason == "malformed_verdict"
    no_tools = json.dumps(
        {
            "verdict": "revise",
            "findings": [{"category": "tool_use", "problem": "p", "direction": "d"}],
        }
    )
    assert parse_verdict(no_tools, tools=False).result == "unavailable"
    assert parse_verdict('{"verdict": "unavailable"}').reason == "reviewer_unavailable"


class _Completion:
    def __init__(self, text: str) -> None:
        self.text, self.usage = text, None

    def raise_for_error(self) -> _Completion:
        return self


class _Reviewer:
    """A provider stand-in that answers every review with the next scripted verdict."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[Any] = []

    async def complete(self, request: Any, **kw: Any) -> _Completion:
        self.requests.append(request)
        return _Completion(self.answers.pop(0))


def context(reviewer: _Reviewer, family: str = "openai") -> ReviewerContext:
    async def admit() -> bool:
        return True

    return ReviewerContext(reviewer, FAMILY_DEFAULTS[family], "m", 700, admit)  # type: ignore[arg-type]


async def test_review_limits_and_end_on_unavailable() -> None:
    config = ReviewConfig(enabled=True, evidence=EVIDENCE, thinking_level="high")
    state = ReviewState()
    reviewer = _Reviewer('{"verdict": "pass", "findings": []}', "garbage")
    assert (await review_candidate(state, config, "one", context(reviewer))).result == "pass"
    assert reviewer.requests[0].reasoning_effort == "high"
    assert reviewer.requests[0].sampling.max_tokens == 700
    assert (await review_candidate(state, config, "two", context(reviewer))).result == "unavailable"
    assert state.ended and state.reviews == 2
    # ended: no more reviewer calls this turn
    assert (
        await review_candidate(state, config, "three", context(reviewer))
    ).reason == "review_ended"


async def test_anthropic_reviewer_runs_without_thinking() -> None:
    config = ReviewConfig(enabled=True, evidence=EVIDENCE, thinking_level="high")
    reviewer = _Reviewer('{"verdict": "pass", "findings": []}')
    await review_candidate(ReviewState(), config, "one", context(reviewer, "anthropic"))
    assert reviewer.requests[0].reasoning_effort is None


async def test_rule_checker_failure_proceeds_and_report_reaches_only_the_reviewer() -> None:
    class Broken:
        async def check(self, text: str) -> str | None:
            raise RuntimeError("mcp down")

    class Linter:
        async def check(self, text: str) -> str | None:
            return "adverb overuse"

    reviewer = _Reviewer(
        '{"verdict": "pass", "findings": []}', '{"verdict": "pass", "findings": []}'
    )
    broken = ReviewConfig(enabled=True, evidence=EVIDENCE, rule_checker=Broken())
    assert (await review_candidate(ReviewState(), broken, "x", context(reviewer))).result == "pass"
    linted = ReviewConfig(enabled=True, evidence=EVIDENCE, rule_checker=Linter())
    await review_candidate(ReviewState(), linted, "x", context(reviewer))
    assert "adverb overuse" in reviewer.requests[1].messages[-1].text()
