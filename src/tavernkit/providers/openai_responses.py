"""OpenAI Responses API (``POST /responses``), also emulated by DeepSeek, LM Studio and
llama.cpp.

The stream is typed events (``response.output_text.delta``, ``response.function_call_
arguments.delta``, ``response.reasoning_summary_text.delta`` …) ending with
``response.completed``, ``response.incomplete`` or ``response.failed``; an ``error`` event
may come first inside an HTTP-200 stream. Function calls are keyed by ``item_id`` and answered
by ``call_id``. Emulations omit ``sequence_number`` and ``output_index``, so nothing relies on
them. Assistant text in a ``commentary`` phase item is progress narration, not the reply: it
is kept as reasoning. Encrypted reasoning content is kept as the block's ``data`` so it can go
back verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import BadRequest, ProviderError
from tavernkit.providers.base import Adapter, ErrorContext, StreamParser, WireRequest, load_json
from tavernkit.providers.classify import openai_family_error, openai_http_error
from tavernkit.providers.events import (
    Finish,
    ProviderErrorEvent,
    ReasoningDelta,
    RefusalDelta,
    ResponseMeta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import ChatMessage, ChatPrompt, PromptRequest, WireTextPart
from tavernkit.providers.sse import SSEEvent

__all__ = ["OpenAIResponsesAdapter"]


def _usage(u: Mapping[str, Any]) -> Usage:
    in_details = u.get("input_tokens_details") or {}
    out_details = u.get("output_tokens_details") or {}
    return Usage(
        input_tokens=u.get("input_tokens"),
        output_tokens=u.get("output_tokens"),
        total_tokens=u.get("total_tokens"),
        cached_input_tokens=in_details.get("cached_tokens")
        if isinstance(in_details, dict)
        else None,
        reasoning_tokens=out_details.get("reasoning_tokens")
        if isinstance(out_details, dict)
        else None,
        raw=u,
    )


def _ending(response: Mapping[str, Any], has_calls: bool, out: list[StreamEvent]) -> None:
    if response.get("usage"):
        out.append(_usage(response["usage"]))
    status = response.get("status")
    if status == "incomplete":
        details = response.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        out.append(
            Finish("content_filter" if reason == "content_filter" else "length", reason or status)
        )
    elif status in ("completed", None):
        out.append(Finish("tool_calls" if has_calls else "stop", status or "completed"))


class ResponsesStreamParser(StreamParser):
    def __init__(self, ctx: ErrorContext) -> None:
        super().__init__(ctx)
        self._tools: dict[str, int] = {}
        self._args_seen: set[str] = set()
        self._commentary: set[str] = set()
        self._errored = False

    def _tool_index(self, item_id: str) -> int:
        index = self._tools.get(item_id)
        if index is None:
            index = self._tools[item_id] = len(self._tools)
        return index

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        obj = load_json(event.data, self.ctx, "stream event")
        if not isinstance(obj, dict):
            return []
        kind = obj.get("type") or event.event or ""
        out: list[StreamEvent] = []
        item_id = str(obj.get("item_id") or "")
        if kind == "response.output_text.delta":
            if obj.get("delta"):
                if item_id in self._commentary:
                    out.append(ReasoningDelta(obj["delta"], block=item_id))
                else:
                    out.append(TextDelta(obj["delta"]))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if obj.get("delta"):
                out.append(ReasoningDelta(obj["delta"], block=item_id or None))
        elif kind == "response.function_call_arguments.delta":
            self._args_seen.add(item_id)
            out.append(
                ToolCallDelta(self._tool_index(item_id), arguments_fragment=obj.get("delta") or "")
            )
        elif kind == "response.function_call_arguments.done":
            if item_id not in self._args_seen and obj.get("arguments"):
                self._args_seen.add(item_id)
                out.append(
                    ToolCallDelta(self._tool_index(item_id), arguments_fragment=obj["arguments"])
                )
        elif kind == "response.refusal.delta":
            if obj.get("delta"):
                out.append(RefusalDelta(obj["delta"]))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(obj.get("item") or {}, kind.endswith("done"), out)
        elif kind in ("response.created", "response.in_progress"):
            response = obj.get("response") or {}
            out.append(ResponseMeta(response.get("id") or None, response.get("model") or None))
        elif kind in ("response.completed", "response.incomplete"):
            self.done = True
            _ending(obj.get("response") or {}, bool(self._tools), out)
        elif kind == "response.failed":
            self.done = True
            response = obj.get("response") or {}
            if response.get("usage"):
                out.append(_usage(response["usage"]))
            if not self._errored:
                self._errored = True
                out.append(
                    ProviderErrorEvent(
                        openai_family_error(
                            None,
                            {"error": response.get("error") or {}},
                            self.ctx,
                            raw=event.data,
                        )
                    )
                )
        elif kind == "error":
            self.done = True
            if not self._errored:
                self._errored = True
                err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
                out.append(
                    ProviderErrorEvent(
                        openai_family_error(None, {"error": err}, self.ctx, raw=event.data)
                    )
                )
        return out

    def _item(self, item: Mapping[str, Any], done: bool, out: list[StreamEvent]) -> None:
        itype = item.get("type")
        item_id = str(item.get("id") or "")
        if itype == "function_call":
            index = self._tool_index(item_id)
            if not done:
                out.append(
                    ToolCallDelta(
                        index, id=item.get("call_id") or None, name=item.get("name") or None
                    )
                )
            elif item_id not in self._args_seen:
                self._args_seen.add(item_id)
                out.append(
                    ToolCallDelta(
                        index,
                        id=item.get("call_id") or None,
                        name=item.get("name") or None,
                        arguments_fragment=item.get("arguments") or "",
                    )
                )
        elif itype == "message" and item.get("phase") == "commentary":
            self._commentary.add(item_id)
        elif itype == "reasoning" and done and item.get("encrypted_content"):
            out.append(ReasoningDelta(data=item["encrypted_content"], block=item_id))


class OpenAIResponsesAdapter(Adapter):
    name: ClassVar[str] = "openai_responses"

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, ChatPrompt):
            raise BadRequest("the Responses API needs a message list", model=model)
        items: list[dict[str, Any]] = []
        for m in request.messages:
            items.extend(_input_items(m))
        body: dict[str, Any] = {"model": model, "input": items}
        s = request.sampling
        for key, value in (
            ("max_output_tokens", s.max_tokens),
            ("temperature", s.temperature),
            ("top_p", s.top_p),
        ):
            if value is not None:
                body[key] = value
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                    **({"strict": t.strict} if t.strict is not None else {}),
                }
                for t in request.tools
            ]
        if request.response_format is not None and request.response_format.schema is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": request.response_format.name,
                    "schema": dict(request.response_format.schema),
                    "strict": request.response_format.strict,
                }
            }
        if request.reasoning_effort:
            body["reasoning"] = {"effort": request.reasoning_effort, "summary": "auto"}
        body["stream"] = stream
        body.update(s.extra_body)
        return WireRequest("POST", "/responses", body, stream=stream)

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        obj = load_json(body, ctx)
        out: list[StreamEvent] = []
        if not isinstance(obj, dict):
            return out
        out.append(ResponseMeta(obj.get("id") or None, obj.get("model") or None))
        calls = 0
        for item in obj.get("output") or []:
            itype = item.get("type")
            if itype == "message":
                commentary = item.get("phase") == "commentary"
                for part in item.get("content") or []:
                    if part.get("type") == "output_text" and part.get("text"):
                        out.append(
                            ReasoningDelta(part["text"], block=item.get("id"))
                            if commentary
                            else TextDelta(part["text"])
                        )
                    elif part.get("type") == "refusal" and part.get("refusal"):
                        out.append(RefusalDelta(part["refusal"]))
            elif itype == "reasoning":
                for summary in item.get("summary") or []:
                    if summary.get("text"):
                        out.append(ReasoningDelta(summary["text"], block=item.get("id")))
                if item.get("encrypted_content"):
                    out.append(ReasoningDelta(data=item["encrypted_content"], block=item.get("id")))
            elif itype == "function_call":
                out.append(
                    ToolCallDelta(
                        calls,
                        id=item.get("call_id") or None,
                        name=item.get("name") or None,
                        arguments_fragment=item.get("arguments") or "",
                    )
                )
                calls += 1
        if obj.get("error"):
            out.append(ProviderErrorEvent(openai_family_error(None, {"error": obj["error"]}, ctx)))
        else:
            _ending(obj, calls > 0, out)
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return ResponsesStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        return openai_http_error(status, body, headers, ctx)


def _input_items(m: ChatMessage) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [
            {"type": "function_call_output", "call_id": m.tool_call_id or "", "output": m.text()}
        ]
    items: list[dict[str, Any]] = []
    text_type = "output_text" if m.role == "assistant" else "input_text"
    if isinstance(m.content, str):
        content: list[dict[str, Any]] = (
            [{"type": text_type, "text": m.content}] if m.content else []
        )
    else:
        content = [
            {"type": text_type, "text": p.text}
            if isinstance(p, WireTextPart)
            else {"type": "input_image", "image_url": p.data_url()}
            for p in m.content
        ]
    if content:
        items.append({"role": m.role, "content": content})
    for call in m.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return items
