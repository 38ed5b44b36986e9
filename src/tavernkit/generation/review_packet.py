"""What the response reviewer reads and answers (see :mod:`tavernkit.generation.review`): the
bounded packet (:func:`build_packet`: fixed evidence first, then the candidate, findings and
tool outcomes), the credential checks that make review unavailable or mask tool arguments,
and the verdict's schema and parser. Import these from :mod:`tavernkit.generation.review`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tavernkit.errors import ReviewUnavailable as ReviewUnavailable
from tavernkit.providers.request import ChatMessage, ToolSpec, WireTextPart

__all__ = [
    "CATEGORIES",
    "EMPTY_LINTER_REPORT",
    "LINTER_LIMIT",
    "MAX_FINDINGS",
    "MAX_FINDING_CHARS",
    "RUBRIC",
    "Category",
    "ContentSelection",
    "Finding",
    "ReviewEvidence",
    "ReviewPacket",
    "Verdict",
    "build_packet",
    "contains_credential",
    "mask_credentials",
    "parse_verdict",
    "redaction_needed",
    "verdict_schema",
]

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


EMPTY_LINTER_REPORT = "(the rule checker reported nothing; this does not approve the candidate)"


def _escape(text: str) -> str:
    return text.replace("</", "<\\/")


def _message_text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(p.text if isinstance(p, WireTextPart) else "[image]" for p in message.content)


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
    outcomes = list(tool_outcomes) if selection.tools else []
    _check_evidence(evidence, candidate, selection, outcomes)
    coverage: list[str] = []
    head = _packet_head(evidence, selection, linter_report, coverage)
    tail = _packet_tail(candidate, findings, outcomes, linter_report, coverage)
    tools_part = ""
    if selection.tools and evidence.tools:
        tools_part = f"<tools>\n{_escape(_tool_catalogue(evidence.tools))}\n</tools>"
    fixed_size = sum(len(p.encode()) + 1 for p in (*head, *tail, tools_part))
    if fixed_size > limit_bytes:
        raise ReviewUnavailable("packet_too_large")
    context: list[str] = []
    if selection.recent and evidence.history:
        context = _recent_context(evidence, limit_bytes - fixed_size, coverage)
    if tools_part:
        coverage.append("tools")
    stable = "\n".join([*head, *context, *([tools_part] if tools_part else [])])
    text = stable + "\n" + "\n".join(tail)
    return ReviewPacket(text, tuple(coverage), len(text.encode()), len(stable) + 1)


def _scrubbed(text: str) -> str:
    return "[redacted]" if contains_credential(text) else _escape(text)


def _check_evidence(
    evidence: ReviewEvidence,
    candidate: str,
    selection: ContentSelection,
    outcomes: Sequence[tuple[str, Any, str]],
) -> None:
    """:class:`ReviewUnavailable` when the packet would miss what the review needs, or
    would carry a credential."""
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
    for _, args, _ in outcomes:
        why = redaction_needed(args)
        if why:
            raise ReviewUnavailable(f"tool_arguments_need_{why}_redaction")


def _packet_head(
    evidence: ReviewEvidence,
    selection: ContentSelection,
    linter_report: str | None,
    coverage: list[str],
) -> list[str]:
    """The packet's opening: the rubric, the persona, examples and memories selected, the
    trigger and the reply target."""
    depth = ' depth="detailed"' if linter_report is not None else ""
    head: list[str] = [f'<review rubric="{RUBRIC}"{depth}>']
    if selection.persona and evidence.persona:
        head.append(f"<persona>\n{_scrubbed(evidence.persona)}\n</persona>")
        coverage.append("persona")
    if selection.examples and evidence.examples:
        body = "\n".join(f"<example>{_scrubbed(e)}</example>" for e in evidence.examples)
        head.append(f"<examples>\n{body}\n</examples>")
        coverage.append("examples")
    if selection.memories and evidence.memories:
        body = "\n".join(f"<memory>{_scrubbed(m)}</memory>" for m in evidence.memories)
        head.append(f"<memories>\n{body}\n</memories>")
        coverage.append("memories")
    trigger = evidence.trigger
    assert trigger is not None and evidence.reply_target is not None  # checked first
    head.append(
        f'<trigger role="{trigger.role}">{_scrubbed(_message_text(trigger))}</trigger>\n'
        f"<reply_target>{_scrubbed(evidence.reply_target)}</reply_target>"
    )
    coverage += ["trigger", "reply_target"]
    return head


def _packet_tail(
    candidate: str,
    findings: Sequence[Finding],
    outcomes: Sequence[tuple[str, Any, str]],
    linter_report: str | None,
    coverage: list[str],
) -> list[str]:
    """The packet's end: the candidate, the linter's report, earlier findings and the
    tools' outcomes."""
    tail: list[str] = [f'<candidate status="pending">\n{_scrubbed(candidate)}\n</candidate>']
    if linter_report is not None:
        report = linter_report.encode()[:LINTER_LIMIT].decode("utf-8", "ignore").strip()
        body = _scrubbed(report) if report else EMPTY_LINTER_REPORT
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
            f" => {_scrubbed(str(mask_credentials(result)))}</tool_outcome>"
            for name, args, result in outcomes
        )
        tail.append(f"<tool_outcomes>\n{body}\n</tool_outcomes>")
        coverage.append("tool_outcomes")
    tail.append("</review>")
    return tail


def _recent_context(evidence: ReviewEvidence, budget: int, coverage: list[str]) -> list[str]:
    """The chat's recent messages that fit in ``budget`` bytes, newest first (at least two)."""
    budget -= len(b"<context>\n</context>\n")
    lines = [
        f'<message role="{m.role}">{_scrubbed(_message_text(m))}</message>'
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
    coverage.append(f"recent:{len(chosen)}/{len(lines)}")
    return ["<context>", *reversed(chosen), "</context>"]
