"""Optional response review ("drafting"): a second read of the reply before anyone sees it.

With drafting on, prose is held until a reviewer model has read it. One :class:`ReviewState`
serves the whole turn, across key rotation and model fallback; impersonation and quiet turns
are never reviewed.

The reviewer reads a bounded **packet** in a fixed order: evidence fixed for the turn first
(persona/task instructions, the triggering message and the reply target, recent context as the
"content to check" selection allows, the tool catalogue as names, descriptions and parameter
names), then the candidate, earlier findings and tool outcomes. The stable part first means a
second review reuses the provider's prompt-prefix cache. Media become placeholders. The packet
records what it covered.

Review is **unavailable** (never silently masked) when required evidence is missing, when the
candidate contains something shaped like a credential, or when tool arguments would need
credential or user-info redaction; the trace says which. Values under credential keys in
structured tool arguments and outcomes are masked.

The verdict comes through structured output: ``pass``, ``revise`` (1-4 findings in fixed
categories) or ``unavailable``. A turn gets at most two reviews and one revision; another
``revise`` delivers the latest candidate. ``unavailable`` ends review for the turn and lets the
current prose through, while tool calls rejected earlier stay blocked. Proposed tool calls have
their own pre-execution checkpoint (approve/reject; rejections last for the turn).

An external rule checker (a "prose linter": the owner's ``prose_linter`` MCP registration, see
:mod:`tavernkit.generation.rule_checker`) plugs in through :class:`RuleChecker`. Its report (at
most 32 KB) reaches only the reviewer, as ``<prose_linter_report advisory="true">``, and makes
the review a detailed one (the packet says ``depth="detailed"`` and the reviewer is told to
weigh each point); it never reaches the author's revision directive, the stored chat or the
logs. A failing checker lets review proceed without a report; an empty report is shown as
empty and approves nothing (the reviewer's verdict decides); a checker that answers ``None``
(no registration, or a disabled or removed one) is no checker at all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tavernkit.errors import ProviderError
from tavernkit.errors import ReviewUnavailable as ReviewUnavailable
from tavernkit.generation.continuation import fill
from tavernkit.generation.plan import FundingScope, Plan, PlanEntry, Unusable, endpoint_usable
from tavernkit.generation.result import add_usage, classify_error
from tavernkit.generation.review_packet import (
    CATEGORIES,
    EMPTY_LINTER_REPORT,
    LINTER_LIMIT,
    RUBRIC,
    Category,
    ContentSelection,
    Finding,
    ReviewEvidence,
    ReviewPacket,
    Verdict,
    build_packet,
    contains_credential,
    mask_credentials,
    parse_verdict,
    redaction_needed,
    verdict_schema,
)
from tavernkit.providers.events import Usage
from tavernkit.providers.http import AbortLike
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import ChatMessage, ChatPrompt, ResponseFormat, Sampling

__all__ = [
    "CATEGORIES",
    "EMPTY_LINTER_REPORT",
    "LINTER_LIMIT",
    "RUBRIC",
    "Category",
    "ContentSelection",
    "Finding",
    "ProposedCall",
    "ReviewConfig",
    "ReviewEvidence",
    "ReviewPacket",
    "ReviewState",
    "ReviewUnavailable",
    "ReviewerContext",
    "RuleChecker",
    "ToolCheckpoint",
    "Verdict",
    "build_packet",
    "contains_credential",
    "mask_credentials",
    "parse_verdict",
    "pinned_reviewer",
    "redaction_needed",
    "review_candidate",
    "review_unavailable",
    "revision_directive",
    "verdict_schema",
]

log = logging.getLogger("tavernkit.generation.review")


class RuleChecker(Protocol):
    """An external prose checker: its report on ``text``, or ``None`` when there is no
    checker to ask (which is not the same as an empty report)."""

    async def check(self, text: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ProposedCall:
    name: str
    args: Mapping[str, Any]
    identity: str


ToolCheckpoint = Callable[
    [Sequence[ProposedCall]], Awaitable[Mapping[str, Literal["approve", "reject"]]]
]

REVIEWER_INSTRUCTIONS = (
    "You review a role-play reply before it is shown. Read the evidence, then the pending "
    'candidate. Answer with JSON only: {"verdict": "pass"|"revise"|"unavailable", '
    '"findings": [...]}. Use revise only for real problems, with 1 to 4 findings, each a '
    "category, the problem and a direction for the author. Use unavailable when the evidence "
    "is not enough to judge."
)
DETAILED_REVIEW_INSTRUCTIONS = (
    'A rule checker\'s report is attached as <prose_linter_report advisory="true">. Review in '
    "detail: weigh each point of the report against the candidate and the evidence. The report "
    "is advisory (it may be wrong), and a report with nothing in it does not approve the "
    "candidate: judge the candidate yourself."
)
DEFAULT_REVISION_DIRECTIVE = (
    "A reviewer read your draft reply and asks for a revision. Write the whole reply again, "
    "fixing these points:\n{findings}"
)


@dataclass(frozen=True)
class ReviewConfig:
    """Drafting settings of a profile. ``reviewer`` is ``"inherited"`` (the author attempt's
    own model and key) or a pinned entry that the plan re-validates like any attempt."""

    enabled: bool = False
    evidence: ReviewEvidence = field(default_factory=ReviewEvidence)
    selection: ContentSelection = field(default_factory=ContentSelection)
    reviewer: Literal["inherited"] | PlanEntry = "inherited"
    thinking_level: str | None = None
    max_reviews: int = 2
    max_revisions: int = 1
    limit_bytes: int = 96_000
    rule_checker: RuleChecker | None = None
    tool_checkpoint: ToolCheckpoint | None = None
    revision_directive: str = DEFAULT_REVISION_DIRECTIVE


@dataclass
class ReviewState:
    """One per turn, shared across key rotation and model fallback."""

    reviews: int = 0
    revisions: int = 0
    ended: bool = False
    rejections: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    usage: Usage | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReviewerContext:
    """How to reach the reviewer for one review (the author's provider when inherited)."""

    provider: Provider
    profile: ModelProfile
    model: str
    max_tokens: int | None
    admit: Callable[[], Awaitable[bool]]
    abort: AbortLike | None = None


async def _ask(
    ctx: ReviewerContext, packet: ReviewPacket, config: ReviewConfig, *, detailed: bool = False
) -> tuple[Verdict, Usage | None]:
    tools = config.selection.tools
    # Anthropic's structured call forces a tool, which the API refuses with extended thinking
    thinking = None if ctx.profile.family == "anthropic" else config.thinking_level
    instructions = REVIEWER_INSTRUCTIONS
    if detailed:
        instructions += "\n\n" + DETAILED_REVIEW_INSTRUCTIONS
    request = ChatPrompt(
        (ChatMessage("system", instructions), ChatMessage("user", packet.text)),
        sampling=Sampling(max_tokens=ctx.max_tokens),
        response_format=ResponseFormat(verdict_schema(tools), name="review_verdict"),
        reasoning_effort=thinking,
    )
    completion = await ctx.provider.complete(
        request, model=ctx.model, profile=ctx.profile, abort=ctx.abort
    )
    completion.raise_for_error()
    return parse_verdict(completion.text, tools=tools), completion.usage


async def review_candidate(
    state: ReviewState,
    config: ReviewConfig,
    candidate: str,
    ctx: ReviewerContext,
    *,
    tool_outcomes: Sequence[tuple[str, Any, str]] = (),
) -> Verdict:
    """One review of ``candidate`` within the turn's limits. Never raises for reviewer
    trouble: that is an ``unavailable`` verdict with the reason in the trace."""
    if state.ended:
        return Verdict("unavailable", reason="review_ended")
    if state.reviews >= config.max_reviews:
        return Verdict("pass", reason="review_limit")
    report = None
    if config.rule_checker is not None:
        try:
            report = await config.rule_checker.check(candidate)
        except Exception as exc:  # a broken checker must not block the reply
            # the class only: a checker's message may quote the private draft
            log.warning("review: rule checker failed (%s)", type(exc).__name__)
            report = None
    try:
        packet = build_packet(
            config.evidence,
            candidate,
            selection=config.selection,
            findings=state.findings,
            tool_outcomes=tool_outcomes,
            linter_report=report,
            limit_bytes=config.limit_bytes,
        )
    except ReviewUnavailable as exc:
        return _end(state, Verdict("unavailable", reason=exc.reason))
    if not await ctx.admit():
        return _end(state, Verdict("unavailable", reason="admission_refused"))
    state.reviews += 1
    try:
        verdict, usage = await _ask(ctx, packet, config, detailed=report is not None)
    except ProviderError as exc:
        cls, code = classify_error(exc)
        log.warning("review: reviewer failed: %s (%s)", cls, code)
        return _end(state, Verdict("unavailable", reason=f"reviewer_{cls}"))
    state.usage = add_usage(state.usage, usage)
    state.trace.append(
        {
            "review": state.reviews,
            "verdict": verdict.result,
            "reason": verdict.reason,
            "coverage": list(packet.coverage),
            "findings": [f.category for f in verdict.findings],
            "packet_bytes": packet.size,
        }
    )
    log.info(
        "review %d: %s (%d findings, %d bytes)",
        state.reviews,
        verdict.result,
        len(verdict.findings),
        packet.size,
    )
    if verdict.result == "unavailable":
        state.ended = True
    elif verdict.result == "revise":
        state.findings.extend(verdict.findings)
    return verdict


def revision_directive(verdict: Verdict, config: ReviewConfig) -> str:
    findings = "\n".join(f"- [{f.category}] {f.problem} -> {f.direction}" for f in verdict.findings)
    return fill(config.revision_directive, findings=findings)


async def pinned_reviewer(
    plan: Plan,
    entry: PlanEntry,
    scope: FundingScope,
    *,
    max_tokens: int | None,
    abort: AbortLike | None,
) -> ReviewerContext | None:
    """A pinned reviewer, re-validated like an attempt: ownership before any key loads, then
    its own registration and credentials. ``None`` when it cannot be used."""
    if entry.endpoint is not None and not endpoint_usable(entry.endpoint, scope):
        return None
    try:
        target = await plan.resolver(entry, scope)
    except Unusable:
        return None
    secret = None
    if target.pool is not None:
        key = await target.pool.select()
        if key is None:
            return None
        secret = await target.pool.secret(key)

    async def admit() -> bool:
        return await plan.admit(entry.model, scope, "review", entry)

    provider = target.make_provider(secret)
    return ReviewerContext(provider, target.profile, entry.model, max_tokens, admit, abort)


def review_unavailable(state: ReviewState, reason: str) -> Verdict:
    """End review for the turn with ``reason`` in the trace."""
    return _end(state, Verdict("unavailable", reason=reason))


def _end(state: ReviewState, verdict: Verdict) -> Verdict:
    state.ended = True
    state.trace.append(
        {"review": state.reviews, "verdict": "unavailable", "reason": verdict.reason}
    )
    log.info("review unavailable: %s", verdict.reason)
    return verdict
