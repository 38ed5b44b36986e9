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

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tavernkit.errors import ProviderError
from tavernkit.errors import ReviewUnavailable as ReviewUnavailable
from tavernkit.generation.continuation import fill
from tavernkit.generation.plan import FundingScope, Plan, PlanEntry, Unusable, endpoint_usable
from tavernkit.generation.result import add_usage, classify_error
from tavernkit.providers.events import Usage
from tavernkit.providers.http import AbortLike
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.provider import Provider
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    ResponseFormat,
    Sampling,
    TextPart,
    ToolSpec,
)

__all__ = [
    "CATEGORIES",
    "RUBRIC",
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

RUBRIC = "roleplay-response-v1"
Category = Literal[
    "character", "voice", "initiative", "chemistry", "repetition", "continuity", "tool_use"
]
CATEGORIES: tuple[str, ...] = (
    "character",
    "voice",
    "initiative",
    "chemistry",
    "repetition",
    "continuity",
    "tool_use",
)
MAX_FINDINGS = 4
MAX_FINDING_CHARS = 300
LINTER_LIMIT = 32 * 1024

_CREDENTIAL_SHAPES = (
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bxox[abpr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
)
_CREDENTIAL_KEY = re.compile(
    r"(?:api[_-]?key|apikey|secret|token|password|passwd|authorization|cookie|credential|"
    r"private[_-]?key|access[_-]?key)",
    re.IGNORECASE,
)
_USER_INFO_KEY = re.compile(
    r"^(?:email|e-mail|phone|phone_number|address|home_address|ssn|birthday|date_of_birth|"
    r"real_name|full_name|user_info)$",
    re.IGNORECASE,
)


def contains_credential(text: str) -> bool:
    """Whether ``text`` holds something shaped like a secret (a key, a token, a PEM block).

    Shapes only: the log redactor's ``key: value`` heuristic would match ordinary prose."""
    return any(p.search(text) for p in _CREDENTIAL_SHAPES)


def mask_credentials(value: Any) -> Any:
    """``value`` with everything under a credential-named key (at any depth) masked."""
    if isinstance(value, Mapping):
        return {
            k: "***" if _CREDENTIAL_KEY.search(str(k)) else mask_credentials(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_credentials(v) for v in value]
    if isinstance(value, str) and contains_credential(value):
        return "***"
    return value


def redaction_needed(args: Any) -> str | None:
    """``"credential"`` or ``"user_info"`` when tool arguments would need redaction."""
    if isinstance(args, Mapping):
        for k, v in args.items():
            if _USER_INFO_KEY.match(str(k)) and v not in (None, ""):
                return "user_info"
            if _CREDENTIAL_KEY.search(str(k)) and v not in (None, ""):
                return "credential"
            inner = redaction_needed(v)
            if inner:
                return inner
    elif isinstance(args, list | tuple):
        for v in args:
            inner = redaction_needed(v)
            if inner:
                return inner
    elif isinstance(args, str) and contains_credential(args):
        return "credential"
    return None


@dataclass(frozen=True, slots=True)
class Finding:
    category: str
    problem: str
    direction: str


@dataclass(frozen=True, slots=True)
class Verdict:
    result: Literal["pass", "revise", "unavailable"]
    findings: tuple[Finding, ...] = ()
    reason: str = ""


def verdict_schema(tools: bool = True) -> dict[str, Any]:
    categories = [c for c in CATEGORIES if tools or c != "tool_use"]
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["verdict", "findings"],
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "revise", "unavailable"]},
            "findings": {
                "type": "array",
                "maxItems": MAX_FINDINGS,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["category", "problem", "direction"],
                    "properties": {
                        "category": {"type": "string", "enum": categories},
                        "problem": {"type": "string", "maxLength": MAX_FINDING_CHARS},
                        "direction": {"type": "string", "maxLength": MAX_FINDING_CHARS},
                    },
                },
            },
        },
    }


def parse_verdict(text: str, *, tools: bool = True) -> Verdict:
    """The reviewer's answer; anything outside the schema is ``unavailable`` (malformed)."""
    try:
        data = json.loads(text.strip().removeprefix("```json").removesuffix("```"))
    except ValueError:
        return Verdict("unavailable", reason="malformed_verdict")
    if not isinstance(data, Mapping):
        return Verdict("unavailable", reason="malformed_verdict")
    result = data.get("verdict")
    if result == "pass":
        return Verdict("pass")
    if result == "unavailable":
        return Verdict("unavailable", reason="reviewer_unavailable")
    raw = data.get("findings")
    if result != "revise" or not isinstance(raw, list) or not 1 <= len(raw) <= MAX_FINDINGS:
        return Verdict("unavailable", reason="malformed_verdict")
    findings = []
    for item in raw:
        if not isinstance(item, Mapping):
            return Verdict("unavailable", reason="malformed_verdict")
        category, problem, direction = (item.get(k) for k in ("category", "problem", "direction"))
        if (
            category not in CATEGORIES
            or (category == "tool_use" and not tools)
            or not isinstance(problem, str)
            or not isinstance(direction, str)
        ):
            return Verdict("unavailable", reason="malformed_verdict")
        findings.append(
            Finding(category, problem[:MAX_FINDING_CHARS], direction[:MAX_FINDING_CHARS])
        )
    return Verdict("revise", tuple(findings))


@dataclass(frozen=True, slots=True)
class ContentSelection:
    """What the reviewer may read ("content to check")."""

    persona: bool = True
    examples: bool = True
    recent: bool = True
    memories: bool = True
    tools: bool = True


@dataclass(frozen=True, slots=True)
class ReviewEvidence:
    """The turn's fixed evidence; the trigger, reply target and candidate are required."""

    persona: str | None = None
    trigger: ChatMessage | None = None
    reply_target: str | None = None
    history: tuple[ChatMessage, ...] = ()
    examples: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class ReviewPacket:
    text: str
    coverage: tuple[str, ...]
    size: int
    #: where the per-candidate part starts (everything before it is stable for the turn)
    stable_prefix: int


def _escape(text: str) -> str:
    return text.replace("</", "<\\/")


def _message_text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(p.text if isinstance(p, TextPart) else "[image]" for p in message.content)


def _tool_catalogue(tools: Sequence[ToolSpec]) -> str:
    lines = []
    for tool in tools:
        props = tool.parameters.get("properties")
        names = ", ".join(props) if isinstance(props, Mapping) else ""
        lines.append(f"- {tool.name}({names}): {tool.description}")
    return "\n".join(lines)


def build_packet(
    evidence: ReviewEvidence,
    candidate: str,
    *,
    selection: ContentSelection = ContentSelection(),
    findings: Sequence[Finding] = (),
    tool_outcomes: Sequence[tuple[str, Any, str]] = (),
    linter_report: str | None = None,
    limit_bytes: int = 96_000,
) -> ReviewPacket:
    """The reviewer's packet, or :class:`ReviewUnavailable` naming the gap."""
    if selection.persona and not (evidence.persona or "").strip():
        raise ReviewUnavailable("missing_persona")
    if evidence.trigger is None:
        raise ReviewUnavailable("missing_trigger")
    if evidence.reply_target is None:
        raise ReviewUnavailable("missing_reply_target")
    if not candidate.strip():
        raise ReviewUnavailable("missing_candidate")
    if contains_credential(candidate):
        raise ReviewUnavailable("candidate_contains_credential")
    outcomes = list(tool_outcomes) if selection.tools else []
    for _, args, _ in outcomes:
        why = redaction_needed(args)
        if why:
            raise ReviewUnavailable(f"tool_arguments_need_{why}_redaction")

    def scrubbed(text: str) -> str:
        return "[redacted]" if contains_credential(text) else _escape(text)

    coverage: list[str] = []
    depth = ' depth="detailed"' if linter_report is not None else ""
    head: list[str] = [f'<review rubric="{RUBRIC}"{depth}>']
    if selection.persona and evidence.persona:
        head.append(f"<persona>\n{scrubbed(evidence.persona)}\n</persona>")
        coverage.append("persona")
    if selection.examples and evidence.examples:
        body = "\n".join(f"<example>{scrubbed(e)}</example>" for e in evidence.examples)
        head.append(f"<examples>\n{body}\n</examples>")
        coverage.append("examples")
    if selection.memories and evidence.memories:
        body = "\n".join(f"<memory>{scrubbed(m)}</memory>" for m in evidence.memories)
        head.append(f"<memories>\n{body}\n</memories>")
        coverage.append("memories")
    trigger = evidence.trigger
    head.append(
        f'<trigger role="{trigger.role}">{scrubbed(_message_text(trigger))}</trigger>\n'
        f"<reply_target>{scrubbed(evidence.reply_target)}</reply_target>"
    )
    coverage += ["trigger", "reply_target"]

    tail: list[str] = [f'<candidate status="pending">\n{scrubbed(candidate)}\n</candidate>']
    if linter_report is not None:
        report = linter_report.encode()[:LINTER_LIMIT].decode("utf-8", "ignore").strip()
        body = scrubbed(report) if report else EMPTY_LINTER_REPORT
        tail.append(f'<prose_linter_report advisory="true">\n{body}\n</prose_linter_report>')
        coverage.append("prose_linter_report")
    if findings:
        body = "\n".join(
            f'<finding category="{f.category}">{_escape(f.problem)} -> {_escape(f.direction)}'
            "</finding>"
            for f in findings
        )
        tail.append(f"<findings>\n{body}\n</findings>")
        coverage.append("findings")
    if outcomes:
        body = "\n".join(
            f'<tool_outcome name="{name}">'
            f"{_escape(json.dumps(mask_credentials(args), ensure_ascii=False, default=str))}"
            f" => {scrubbed(str(mask_credentials(result)))}</tool_outcome>"
            for name, args, result in outcomes
        )
        tail.append(f"<tool_outcomes>\n{body}\n</tool_outcomes>")
        coverage.append("tool_outcomes")
    tail.append("</review>")

    tools_part = ""
    if selection.tools and evidence.tools:
        tools_part = f"<tools>\n{_escape(_tool_catalogue(evidence.tools))}\n</tools>"
    fixed_size = sum(len(p.encode()) + 1 for p in (*head, *tail, tools_part))
    if fixed_size > limit_bytes:
        raise ReviewUnavailable("packet_too_large")

    context: list[str] = []
    if selection.recent and evidence.history:
        budget = limit_bytes - fixed_size - len(b"<context>\n</context>\n")
        lines = [
            f'<message role="{m.role}">{scrubbed(_message_text(m))}</message>'
            for m in evidence.history
        ]
        chosen: list[str] = []
        for n, line in enumerate(reversed(lines)):
            size = len(line.encode()) + 1
            if size > budget and n >= 2:
                break
            budget -= size
            chosen.append(line)
        if budget < 0:
            raise ReviewUnavailable("packet_too_large")
        context = ["<context>", *reversed(chosen), "</context>"]
        coverage.append(f"recent:{len(chosen)}/{len(lines)}")
    if tools_part:
        coverage.append("tools")
    stable = "\n".join([*head, *context, *([tools_part] if tools_part else [])])
    text = stable + "\n" + "\n".join(tail)
    return ReviewPacket(text, tuple(coverage), len(text.encode()), len(stable) + 1)


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
EMPTY_LINTER_REPORT = "(the rule checker reported nothing; this does not approve the candidate)"
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
