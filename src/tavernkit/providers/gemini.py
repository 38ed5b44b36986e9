"""Google Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` (AI Studio and Vertex).

Each stream event is a whole ``GenerateContentResponse`` increment: text parts are deltas,
``usageMetadata`` is cumulative, there is no terminator (a ``finishReason`` marks the end) and
events are separated by ``\\r\\n\\r\\n``. Decisions (reference §1.4):

- ``thought: true`` parts are reasoning; a ``thoughtSignature`` on any part is kept (on the
  tool call it came with, else on the reasoning) and must go back on that part next turn;
- ``functionCall`` parts arrive complete, one per call; tool calls finish with ``STOP``, so
  the finish is reported as ``tool_calls`` when calls were seen;
- Gemini 3 / Vertex stream arguments as ``partialArgs`` (``jsonPath`` + value); those are
  assembled here and the call's arguments are emitted once it closes (``functionCall: {}``);
- a blocked prompt has no candidates and a ``promptFeedback.blockReason``: ``content_filter``;
- an invalid key is HTTP 400 ``INVALID_ARGUMENT`` with ``reason: API_KEY_INVALID``: an
  :class:`AuthError`, not a bad request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    ModelUnavailable,
    Overloaded,
    ProviderError,
    QuotaExhausted,
    RateLimited,
)
from tavernkit.providers.base import Adapter, ErrorContext, StreamParser, WireRequest, load_json
from tavernkit.providers.classify import error_payload, make_error, parse_retry_after, status_class
from tavernkit.providers.events import (
    Finish,
    FinishReason,
    ProviderErrorEvent,
    ReasoningDelta,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from tavernkit.providers.openai_chat import image_placeholder
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest, WireTextPart
from tavernkit.providers.sse import SSEEvent

__all__ = ["GeminiAdapter", "gemini_error"]

_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
_STATUS: dict[str, type[ProviderError]] = {
    "UNAUTHENTICATED": AuthError,
    "PERMISSION_DENIED": AuthError,
    "NOT_FOUND": ModelUnavailable,
    "UNAVAILABLE": Overloaded,
    "INTERNAL": Overloaded,
    "DEADLINE_EXCEEDED": Overloaded,
    "INVALID_ARGUMENT": BadRequest,
    "FAILED_PRECONDITION": BadRequest,
}
_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def _finish(raw: str) -> FinishReason:
    if raw == "STOP":
        return "stop"
    if raw == "MAX_TOKENS":
        return "length"
    if raw in _FILTERED:
        return "content_filter"
    if raw in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"):
        return "error"
    return "other"


def _duration(value: Any) -> float | None:
    if isinstance(value, str) and value.endswith("s"):
        try:
            return float(value[:-1])
        except ValueError:
            return None
    return None


def gemini_error(
    status: int | None,
    payload: Any,
    ctx: ErrorContext,
    *,
    raw: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """Gemini's table: ``{"error": {"code", "message", "status", "details": [...]}}``."""
    err = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        err = payload[0].get("error")
    err = err if isinstance(err, dict) else {}
    message = str(err.get("message") or f"HTTP {status}")
    gstatus = str(err.get("status") or "")
    if status is None and isinstance(err.get("code"), int):
        status = err["code"]
    reasons: set[str] = set()
    retry_after: float | None = parse_retry_after(headers) if headers else None
    quota_ids: list[str] = []
    for detail in err.get("details") or []:
        if not isinstance(detail, dict):
            continue
        if detail.get("reason"):
            reasons.add(str(detail["reason"]))
        if "retryDelay" in detail:
            retry_after = _duration(detail["retryDelay"]) or retry_after
        for violation in detail.get("violations") or []:
            if isinstance(violation, dict) and violation.get("quotaId"):
                quota_ids.append(str(violation["quotaId"]))
    cls: type[ProviderError]
    if reasons & {"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"}:
        cls = AuthError
    elif gstatus == "RESOURCE_EXHAUSTED" or status == 429:
        # a per-day (or undated) quota will not refill by waiting a few seconds
        daily = any("PerDay" in q for q in quota_ids)
        cls = QuotaExhausted if daily or (quota_ids and retry_after is None) else RateLimited
    elif gstatus == "INVALID_ARGUMENT" and re.search(
        r"token count|exceeds the maximum number of tokens|too long", message, re.IGNORECASE
    ):
        cls = ContextTooLong
    elif "SAFETY" in message.upper() and status == 400:
        cls = ContentFiltered
    else:
        cls = _STATUS.get(gstatus) or status_class(status)
    return make_error(
        cls,
        message,
        ctx,
        status=status,
        body=raw,
        code=next(iter(sorted(reasons)), gstatus or None),
        retry_after=retry_after,
    )


def _set_path(root: dict[str, Any], path: str, value: Any, append: bool) -> None:
    tokens: list[str | int] = [
        m.group(1) if m.group(1) is not None else int(m.group(2))
        for m in _PATH_TOKEN.finditer(path.removeprefix("$"))
    ]
    if not tokens:
        return
    node: Any = root
    for token, following in zip(tokens, [*tokens[1:], None], strict=True):
        container_factory = list if isinstance(following, int) else dict
        if following is None:
            if isinstance(node, list):
                assert isinstance(token, int)
                while len(node) <= token:
                    node.append(None)
                old = node[token]
                node[token] = old + value if append and isinstance(old, str) else value
            else:
                old = node.get(token)
                node[token] = old + value if append and isinstance(old, str) else value
            return
        if isinstance(node, list):
            assert isinstance(token, int)
            while len(node) <= token:
                node.append(None)
            if not isinstance(node[token], (dict, list)):
                node[token] = container_factory()
            node = node[token]
        else:
            if not isinstance(node.get(token), (dict, list)):
                node[token] = container_factory()
            node = node[token]


class _Calls:
    """Tool-call numbering and the one call whose arguments are being streamed."""

    def __init__(self) -> None:
        self.count = 0
        self.partial_index: int | None = None
        self.partial_args: dict[str, Any] = {}

    def close(self, out: list[StreamEvent], choice: int) -> None:
        if self.partial_index is not None:
            out.append(
                ToolCallDelta(
                    self.partial_index,
                    arguments_fragment=json.dumps(self.partial_args, ensure_ascii=False),
                    choice=choice,
                )
            )
            self.partial_index = None
            self.partial_args = {}


def _response_events(obj: Any, calls: _Calls, out: list[StreamEvent]) -> bool:
    """Events for one response increment; True when it carried a finish reason."""
    if isinstance(obj, list):  # a non-SSE streamed array of increments
        finished = False
        for item in obj:
            finished = _response_events(item, calls, out) or finished
        return finished
    if not isinstance(obj, dict):
        return False
    if obj.get("responseId") or obj.get("modelVersion"):
        out.append(ResponseMeta(obj.get("responseId"), obj.get("modelVersion")))
    finished = False
    for candidate in obj.get("candidates") or []:
        choice = candidate.get("index") or 0
        content = candidate.get("content") or {}
        for part in content.get("parts") or []:
            _part_events(part, choice, calls, out)
        raw = candidate.get("finishReason")
        if raw:
            calls.close(out, choice)
            reason = _finish(raw)
            if reason == "stop" and calls.count:
                reason = "tool_calls"
            out.append(Finish(reason, raw, choice))
            finished = True
    feedback = obj.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason") and not obj.get("candidates"):
        out.append(Finish("content_filter", feedback["blockReason"]))
        finished = True
    usage = obj.get("usageMetadata")
    if isinstance(usage, dict) and usage:
        candidates_tokens = usage.get("candidatesTokenCount")
        thoughts = usage.get("thoughtsTokenCount")
        output = (
            (candidates_tokens or 0) + (thoughts or 0)
            if candidates_tokens is not None or thoughts is not None
            else None
        )
        out.append(
            Usage(
                input_tokens=usage.get("promptTokenCount"),
                output_tokens=output,
                total_tokens=usage.get("totalTokenCount"),
                cached_input_tokens=usage.get("cachedContentTokenCount"),
                reasoning_tokens=thoughts,
                raw=usage,
            )
        )
    return finished


def _part_events(
    part: Mapping[str, Any], choice: int, calls: _Calls, out: list[StreamEvent]
) -> None:
    signature = part.get("thoughtSignature") or None
    call = part.get("functionCall")
    if isinstance(call, dict):
        if "partialArgs" in call:
            for arg in call["partialArgs"] or []:
                path = arg.get("jsonPath") or ""
                if "stringValue" in arg:
                    _set_path(calls.partial_args, path, arg["stringValue"], True)
                elif "numberValue" in arg:
                    _set_path(calls.partial_args, path, arg["numberValue"], False)
                elif "boolValue" in arg:
                    _set_path(calls.partial_args, path, arg["boolValue"], False)
                elif "nullValue" in arg:
                    _set_path(calls.partial_args, path, None, False)
            return
        if call.get("name") and call.get("willContinue"):
            calls.close(out, choice)
            calls.partial_index = calls.count
            calls.count += 1
            out.append(
                ToolCallDelta(
                    calls.partial_index,
                    id=call.get("id") or None,
                    name=call["name"],
                    signature=signature,
                    choice=choice,
                )
            )
            return
        if not call.get("name"):
            if not call.get("willContinue"):
                calls.close(out, choice)
            return
        calls.close(out, choice)
        out.append(
            ToolCallDelta(
                calls.count,
                id=call.get("id") or None,
                name=call["name"],
                arguments_fragment=json.dumps(call.get("args") or {}, ensure_ascii=False),
                signature=signature,
                choice=choice,
            )
        )
        calls.count += 1
        return
    text = part.get("text")
    if part.get("thought"):
        out.append(ReasoningDelta(text or "", signature=signature, choice=choice))
        return
    if text:
        out.append(TextDelta(text, choice))
    if signature:
        out.append(ReasoningDelta(signature=signature, choice=choice))


class GeminiStreamParser(StreamParser):
    def __init__(self, ctx: ErrorContext) -> None:
        super().__init__(ctx)
        self._calls = _Calls()

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        if not event.data.strip():
            return []
        obj = load_json(event.data, self.ctx, "stream event")
        out: list[StreamEvent] = []
        if isinstance(obj, dict) and obj.get("error"):
            self.done = True
            out.append(ProviderErrorEvent(gemini_error(None, obj, self.ctx, raw=event.data)))
            return out
        if _response_events(obj, self._calls, out):
            self.done = True
        return out

    def finish(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        self._calls.close(out, 0)
        return out + super().finish()


class GeminiAdapter(Adapter):
    """``/models/{model}:generateContent`` (or ``:streamGenerateContent?alt=sse``)."""

    name: ClassVar[str] = "gemini"

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, ChatPrompt):
            raise BadRequest("the Gemini API needs a message list", model=model)
        if not model:
            raise BadRequest("the Gemini API needs a model name", provider="gemini")
        vision = profile.supports_vision if profile is not None else True
        system: list[dict[str, Any]] = []
        contents: list[dict[str, Any]] = []
        downgrades: list[str] = []
        tool_names = {c.id: c.name for m in request.messages for c in m.tool_calls}
        for m in request.messages:
            if m.role == "system":
                system.append({"text": m.text()})
                continue
            role = "model" if m.role == "assistant" else "user"
            parts = self._parts(m, vision, downgrades, tool_names)
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": system}
        config = _generation_config(request)
        if config:
            body["generationConfig"] = config
        if request.tools:
            body.update(_tools_body(request))
        s = request.sampling
        body.update(s.extra_body)
        method = "streamGenerateContent" if stream else "generateContent"
        return WireRequest(
            "POST",
            f"/models/{model}:{method}",
            body,
            stream=stream,
            params={"alt": "sse"} if stream else {},
            downgrades=tuple(downgrades),
        )

    def _parts(
        self,
        m: ChatMessage,
        vision: bool,
        downgrades: list[str],
        tool_names: Mapping[str, str],
    ) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if m.role == "tool":
            try:
                result: Any = json.loads(m.text())
            except ValueError:
                result = m.text()
            name = tool_names.get(m.tool_call_id or "", m.name or "")
            response = result if isinstance(result, dict) else {"result": result}
            parts.append({"functionResponse": {"name": name, "response": response}})
            return parts
        for block in m.reasoning_blocks:
            if block.text and not block.redacted:
                thought: dict[str, Any] = {"text": block.text, "thought": True}
                if block.signature:
                    thought["thoughtSignature"] = block.signature
                parts.append(thought)
        if isinstance(m.content, str):
            if m.content:
                parts.append({"text": m.content})
        else:
            for part in m.content:
                if isinstance(part, WireTextPart):
                    parts.append({"text": part.text})
                elif not vision:
                    downgrades.append("image replaced by a text placeholder")
                    parts.append({"text": image_placeholder(part)})
                else:
                    inline = part.base64()
                    if inline:
                        parts.append({"inlineData": {"mimeType": inline[0], "data": inline[1]}})
                    else:
                        parts.append(
                            {"fileData": {"mimeType": part.mime_type, "fileUri": part.url or ""}}
                        )
        for call in m.tool_calls:
            fc: dict[str, Any] = {
                "functionCall": {"name": call.name, "args": call.parsed_arguments() or {}}
            }
            if call.signature:
                fc["thoughtSignature"] = call.signature
            parts.append(fc)
        # a signature that came on a plain text part goes back on the first part
        loose = [b.signature for b in m.reasoning_blocks if b.signature and not b.text]
        if loose and parts and "thoughtSignature" not in parts[0]:
            parts[0]["thoughtSignature"] = loose[0]
        if not parts:
            parts.append({"text": ""})
        return parts

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        obj = load_json(body, ctx)
        out: list[StreamEvent] = []
        calls = _Calls()
        _response_events(obj, calls, out)
        calls.close(out, 0)
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return GeminiStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        payload = error_payload(body)
        return gemini_error(status, payload, ctx, raw=body, headers=headers)


def _generation_config(request: ChatPrompt) -> dict[str, Any]:
    """``generationConfig``: the sampling set, the stop sequences, a JSON schema's output
    format and the thinking budget."""
    s = request.sampling
    config: dict[str, Any] = {}
    for key, value in (
        ("temperature", s.temperature),
        ("topP", s.top_p),
        ("topK", s.top_k),
        ("maxOutputTokens", s.max_tokens),
        ("candidateCount", s.n),
        ("seed", s.seed),
        ("presencePenalty", s.presence_penalty),
        ("frequencyPenalty", s.frequency_penalty),
    ):
        if value is not None:
            config[key] = value
    if request.stop:
        config["stopSequences"] = list(request.stop)
    if request.response_format is not None:
        config["responseMimeType"] = "application/json"
        if request.response_format.schema is not None:
            config["responseJsonSchema"] = dict(request.response_format.schema)
    if request.reasoning_budget is not None:
        config["thinkingConfig"] = {
            "thinkingBudget": request.reasoning_budget,
            "includeThoughts": True,
        }
    return config


def _tools_body(request: ChatPrompt) -> dict[str, Any]:
    """``tools`` (the function declarations) and ``toolConfig`` (the tool choice)."""
    body: dict[str, Any] = {
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    }
                    for t in request.tools
                ]
            }
        ]
    }
    if request.tool_choice:
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}.get(request.tool_choice)
        body["toolConfig"] = {
            "functionCallingConfig": {"mode": mode}
            if mode
            else {"mode": "ANY", "allowedFunctionNames": [request.tool_choice]}
        }
    return body
