"""Anthropic Messages (``POST /v1/messages``), also served by llama.cpp's compatible route.

Stream shape (reference §1.4): ``message_start`` → per block ``content_block_start`` /
``content_block_delta``* / ``content_block_stop`` → ``message_delta`` → ``message_stop``, with
``ping`` anywhere and ``event: error`` possible after HTTP 200. Decisions:

- thinking blocks become reasoning blocks keyed by the content-block index; the signature
  and redacted ``data`` are kept so they go back verbatim on the next turn;
- a tool's input starts as ``""`` and may stay empty (no arguments: ``{}``) or stop mid-JSON at
  ``max_tokens`` (reported as a truncated call, not a crash);
- ``message_delta.usage`` is cumulative and wins over ``message_start``'s counts;
- a second ``message_start`` with the same id is ignored;
- system messages go to the top-level ``system`` blocks; a message marked ``cache`` gets a
  ``cache_control`` breakpoint on its last block (prompt caching of the stable prefix);
- a trailing assistant message (prefill) is refused up front when the model profile says the
  model rejects it, instead of spending a request on a 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import (
    AuthError,
    BadRequest,
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

__all__ = ["AnthropicAdapter", "anthropic_error"]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
    "pause_turn": "pause",
}

_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "authentication_error": AuthError,
    "permission_error": AuthError,
    "billing_error": QuotaExhausted,
    "rate_limit_error": RateLimited,
    "overloaded_error": Overloaded,
    "api_error": Overloaded,
    "timeout_error": Overloaded,
    "request_too_large": ContextTooLong,
    "not_found_error": ModelUnavailable,
    "invalid_request_error": BadRequest,
}


def _usage(u: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=u.get("input_tokens"),
        output_tokens=u.get("output_tokens"),
        cached_input_tokens=u.get("cache_read_input_tokens"),
        cache_write_tokens=u.get("cache_creation_input_tokens"),
        raw=u,
    )


def anthropic_error(
    status: int | None,
    payload: Any,
    ctx: ErrorContext,
    *,
    raw: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """Anthropic's table: ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    err = payload.get("error") if isinstance(payload, dict) else None
    etype = str(err.get("type") or "") if isinstance(err, dict) else ""
    message = str(err.get("message") or "") if isinstance(err, dict) else ""
    cls = _ERROR_TYPES.get(etype) or status_class(status)
    if status == 529:
        cls = Overloaded
    lowered = message.lower()
    if cls is BadRequest and ("prompt is too long" in lowered or "too many tokens" in lowered):
        cls = ContextTooLong
    if cls is RateLimited and isinstance(err, dict):
        details = err.get("details")
        if (
            isinstance(details, dict)
            and details.get("error_code") == "enforced_spend_limit_reached"
        ):
            cls = QuotaExhausted
    request_id = payload.get("request_id") if isinstance(payload, dict) else None
    if not request_id and headers:
        request_id = headers.get("request-id")
    return make_error(
        cls,
        message or f"HTTP {status}",
        ctx,
        status=status,
        body=raw,
        code=etype or None,
        request_id=request_id,
        retry_after=parse_retry_after(headers) if headers else None,
    )


class AnthropicStreamParser(StreamParser):
    def __init__(self, ctx: ErrorContext) -> None:
        super().__init__(ctx)
        self._message_id: str | None = None

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        obj = load_json(event.data, self.ctx, "stream event")
        if not isinstance(obj, dict):
            return []
        kind = obj.get("type") or event.event
        out: list[StreamEvent] = []
        if kind == "content_block_delta":
            index = obj.get("index", 0)
            delta = obj.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                if delta.get("text"):
                    out.append(TextDelta(delta["text"]))
            elif dtype == "input_json_delta":
                out.append(ToolCallDelta(index, arguments_fragment=delta.get("partial_json", "")))
            elif dtype == "thinking_delta":
                out.append(ReasoningDelta(delta.get("thinking", ""), block=index))
            elif dtype == "signature_delta":
                out.append(ReasoningDelta(signature=delta.get("signature"), block=index))
        elif kind == "content_block_start":
            _block_events(obj.get("index", 0), obj.get("content_block") or {}, out)
        elif kind == "message_start":
            message = obj.get("message") or {}
            mid = message.get("id")
            if mid and mid == self._message_id:
                return []
            self._message_id = mid
            out.append(ResponseMeta(mid or None, message.get("model") or None))
            if message.get("usage"):
                out.append(_usage(message["usage"]))
        elif kind == "message_delta":
            delta = obj.get("delta") or {}
            if obj.get("usage"):
                out.append(_usage(obj["usage"]))
            stop = delta.get("stop_reason")
            if stop:
                out.append(Finish(_FINISH.get(stop, "other"), stop))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.done = True
            out.append(ProviderErrorEvent(anthropic_error(None, obj, self.ctx, raw=event.data)))
        return out


def _block_events(index: int, block: Mapping[str, Any], out: list[StreamEvent]) -> None:
    btype = block.get("type")
    if btype == "text":
        if block.get("text"):
            out.append(TextDelta(block["text"]))
    elif btype == "thinking":
        out.append(
            ReasoningDelta(
                block.get("thinking") or "", signature=block.get("signature") or None, block=index
            )
        )
    elif btype == "redacted_thinking":
        out.append(ReasoningDelta(redacted=True, data=block.get("data") or "", block=index))
    elif btype == "tool_use":
        tool_input = block.get("input")
        out.append(
            ToolCallDelta(
                index,
                id=block.get("id") or None,
                name=block.get("name") or None,
                # a non-stream body carries the whole input; a stream's start carries {}
                arguments_fragment=json.dumps(tool_input, ensure_ascii=False) if tool_input else "",
            )
        )


class AnthropicAdapter(Adapter):
    """``POST /v1/messages`` with ``anthropic-version``; ``default_max_tokens`` fills the
    field the API requires when the request leaves it unset."""

    name: ClassVar[str] = "anthropic"
    version: ClassVar[str] = "2023-06-01"

    def __init__(self, *, default_max_tokens: int = 4096) -> None:
        self.default_max_tokens = default_max_tokens

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, ChatPrompt):
            raise BadRequest("the Messages API needs a message list", model=model)
        vision = profile.supports_vision if profile is not None else True
        system: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []
        downgrades: list[str] = []
        for m in request.messages:
            if m.role == "system":
                block: dict[str, Any] = {"type": "text", "text": m.text()}
                if m.cache:
                    block["cache_control"] = {"type": "ephemeral"}
                system.append(block)
                continue
            role = "assistant" if m.role == "assistant" else "user"
            blocks = self._blocks(m, vision, downgrades)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)
            else:
                messages.append({"role": role, "content": blocks})
        if (
            messages
            and messages[-1]["role"] == "assistant"
            and profile is not None
            and not profile.supports_prefill
        ):
            raise BadRequest(
                "this model does not accept a trailing assistant message (prefill)",
                provider="anthropic",
                model=model,
            )
        s = request.sampling
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": s.max_tokens or self.default_max_tokens,
        }
        if system:
            body["system"] = system
        body["messages"] = messages
        for key, value in (("temperature", s.temperature), ("top_p", s.top_p), ("top_k", s.top_k)):
            if value is not None:
                body[key] = value
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if stream:
            body["stream"] = True
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
            choice = request.tool_choice
            if choice in ("auto", "required", "none"):
                body["tool_choice"] = {"type": "any" if choice == "required" else choice}
            elif choice:
                body["tool_choice"] = {"type": "tool", "name": choice}
        if request.reasoning_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": request.reasoning_budget}
        body.update(s.extra_body)
        return WireRequest(
            "POST",
            "/v1/messages",
            body,
            stream=stream,
            headers={"anthropic-version": self.version},
            downgrades=tuple(downgrades),
        )

    def _blocks(self, m: ChatMessage, vision: bool, downgrades: list[str]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if m.role == "assistant":
            for r in m.reasoning_blocks:
                if r.redacted:
                    blocks.append({"type": "redacted_thinking", "data": r.data or ""})
                elif r.signature:
                    blocks.append(
                        {"type": "thinking", "thinking": r.text, "signature": r.signature}
                    )
        if m.role == "tool":
            blocks.append(
                {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.text()}
            )
        elif isinstance(m.content, str):
            if m.content:
                blocks.append({"type": "text", "text": m.content})
        else:
            for part in m.content:
                if isinstance(part, WireTextPart):
                    blocks.append({"type": "text", "text": part.text})
                elif not vision:
                    downgrades.append("image replaced by a text placeholder")
                    blocks.append({"type": "text", "text": image_placeholder(part)})
                else:
                    inline = part.base64()
                    source: dict[str, Any] = (
                        {"type": "base64", "media_type": inline[0], "data": inline[1]}
                        if inline
                        else {"type": "url", "url": part.url or ""}
                    )
                    blocks.append({"type": "image", "source": source})
        for call in m.tool_calls:
            parsed = call.parsed_arguments()
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": parsed if isinstance(parsed, dict) else {},
                }
            )
        if m.cache and blocks:
            blocks[-1]["cache_control"] = {"type": "ephemeral"}
        return blocks

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        obj = load_json(body, ctx)
        out: list[StreamEvent] = []
        if not isinstance(obj, dict):
            return out
        if obj.get("type") == "error":
            out.append(ProviderErrorEvent(anthropic_error(None, obj, ctx, raw=body)))
            return out
        out.append(ResponseMeta(obj.get("id") or None, obj.get("model") or None))
        for index, block in enumerate(obj.get("content") or []):
            if isinstance(block, dict):
                _block_events(index, block, out)
        if obj.get("usage"):
            out.append(_usage(obj["usage"]))
        stop = obj.get("stop_reason")
        if stop:
            out.append(Finish(_FINISH.get(stop, "other"), stop))
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return AnthropicStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        payload = error_payload(body)
        return anthropic_error(status, payload, ctx, raw=body, headers=headers)
