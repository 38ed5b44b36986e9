"""OpenAI Chat Completions, and every server that copies it.

One adapter serves OpenAI, OpenRouter, DeepSeek, xAI, Groq, Mistral, Perplexity, Azure, vLLM,
llama.cpp server, llama-cpp-python, Ollama, KoboldCpp, LM Studio and text-generation-webui;
their differences are data, handled here (reference §1.4):

- reasoning arrives as ``reasoning_content`` (DeepSeek, xAI, Qwen, Z.AI, llama.cpp),
  ``reasoning`` (Groq, OpenRouter), ``reasoning_details`` (OpenRouter; preferred when present,
  because it carries signatures and encrypted blocks), or Mistral's content arrays of
  ``thinking`` chunks;
- usage may sit in a ``choices: []`` chunk, in the finish chunk, in a later chunk, inside
  ``x_groq``, or be cumulative on every chunk; KoboldCpp writes ``"finish_reason": "null"``
  as a string;
- tool-call fragments without ``index`` (Mistral) use their list position;
- errors arrive as HTTP bodies, as ``event: error`` (Groq) or as a chunk with a top-level
  ``error`` next to ``choices`` (OpenRouter).

The request body keeps SillyTavern's key order for the fields it sends (``messages, model,
temperature, max_tokens, stream, presence_penalty, frequency_penalty, top_p``), so a request
built from a SillyTavern preset is the one SillyTavern sends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import BadRequest, ProviderError
from tavernkit.providers.base import (
    Adapter,
    ErrorContext,
    StreamParser,
    WireRequest,
    load_json,
)
from tavernkit.providers.classify import openai_family_error, openai_http_error
from tavernkit.providers.events import (
    Finish,
    FinishReason,
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
from tavernkit.providers.request import (
    ChatMessage,
    ChatPrompt,
    PromptRequest,
    Sampling,
    WireImagePart,
    WireTextPart,
)
from tavernkit.providers.sse import SSEEvent

__all__ = [
    "OpenAIChatAdapter",
    "choice_events",
    "image_placeholder",
    "openai_finish",
    "openai_usage",
]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
    "insufficient_system_resource": "error",
}


def openai_finish(raw: str) -> FinishReason:
    return _FINISH.get(raw, "other")


def image_placeholder(part: WireImagePart) -> str:
    """What a text-only model gets instead of an image (the downgrade is reported)."""
    return "[image omitted: this model does not accept images]"


def openai_usage(usage: Mapping[str, Any]) -> Usage:
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    reasoning = (
        completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    )
    return Usage(
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        total_tokens=usage.get("total_tokens"),
        cached_input_tokens=cached,
        reasoning_tokens=reasoning,
        raw=usage,
    )


def _reasoning_detail(item: Mapping[str, Any], choice: int) -> ReasoningDelta | None:
    kind = item.get("type")
    block = item.get("index")
    fmt = item.get("format")
    if kind == "reasoning.encrypted":
        return ReasoningDelta(
            redacted=True, data=item.get("data") or "", block=block, format=fmt, choice=choice
        )
    text = item.get("text") if kind == "reasoning.text" else item.get("summary")
    signature = item.get("signature")
    if not text and not signature:
        return None
    return ReasoningDelta(
        text=text or "", signature=signature or None, block=block, format=fmt, choice=choice
    )


def choice_events(choice: Mapping[str, Any], key: str, out: list[StreamEvent]) -> None:
    """Events for one ``choices[i]`` entry; ``key`` is ``delta`` (stream), ``message``
    (non-stream) or ``text`` (text completions, where the text sits on the choice)."""
    index = choice.get("index") or 0
    if key == "text":
        delta: Mapping[str, Any] = choice
        content: Any = choice.get("text")
    else:
        delta = choice.get(key) or {}
        content = delta.get("content")
    details = delta.get("reasoning_details")
    if details:
        for item in details:
            if isinstance(item, dict):
                event = _reasoning_detail(item, index)
                if event is not None:
                    out.append(event)
    else:
        reasoning = (
            delta.get("reasoning_content") or delta.get("reasoning") or delta.get("thinking")
        )
        if isinstance(reasoning, str) and reasoning:
            out.append(ReasoningDelta(reasoning, choice=index))
    if isinstance(content, str):
        if content:
            out.append(TextDelta(content, index))
    elif isinstance(content, list):
        _content_array(content, index, out)
    refusal = delta.get("refusal")
    if refusal:
        out.append(RefusalDelta(refusal, index))
    extra = delta.get("extra_content")
    if isinstance(extra, dict):
        google = extra.get("google")
        if isinstance(google, dict) and google.get("thought_signature"):
            out.append(ReasoningDelta(signature=google["thought_signature"], choice=index))
    tool_calls = delta.get("tool_calls")
    if tool_calls:
        for position, call in enumerate(tool_calls):
            fn = call.get("function") or {}
            signature = None
            call_extra = call.get("extra_content")
            if isinstance(call_extra, dict) and isinstance(call_extra.get("google"), dict):
                signature = call_extra["google"].get("thought_signature")
            arguments = fn.get("arguments")
            if arguments is not None and not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            out.append(
                ToolCallDelta(
                    index=call.get("index", position),
                    id=call.get("id") or None,
                    name=fn.get("name") or None,
                    arguments_fragment=arguments or "",
                    signature=signature,
                    choice=index,
                )
            )
    legacy = delta.get("function_call")
    if isinstance(legacy, dict):
        out.append(
            ToolCallDelta(
                index=0,
                name=legacy.get("name") or None,
                arguments_fragment=legacy.get("arguments") or "",
                choice=index,
            )
        )
    finish = choice.get("finish_reason")
    if finish and finish != "null":
        out.append(Finish(openai_finish(finish), finish, index))


def _content_array(content: list[Any], index: int, out: list[StreamEvent]) -> None:
    for part in content:
        if isinstance(part, str):
            if part:
                out.append(TextDelta(part, index))
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            out.append(TextDelta(part["text"], index))
        elif kind == "thinking":
            thinking = part.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.append(ReasoningDelta(thinking, choice=index))
            elif isinstance(thinking, list):
                for piece in thinking:
                    if isinstance(piece, dict) and piece.get("text"):
                        out.append(ReasoningDelta(piece["text"], choice=index))


def chunk_events(obj: Any, key: str, ctx: ErrorContext, out: list[StreamEvent]) -> bool:
    """Events for one chunk (or a whole body); True when it carried an error."""
    if not isinstance(obj, dict):
        return False
    rid = obj.get("id")
    model = obj.get("model")
    if rid or model:
        out.append(ResponseMeta(rid or None, model or None))
    choices = obj.get("choices")
    if choices:
        for choice in choices:
            if isinstance(choice, dict):
                choice_events(choice, key, out)
    usage = obj.get("usage")
    if not usage:
        groq = obj.get("x_groq")
        usage = groq.get("usage") if isinstance(groq, dict) else None
    if isinstance(usage, dict) and usage:
        out.append(openai_usage(usage))
    if obj.get("error"):
        out.append(ProviderErrorEvent(openai_family_error(None, obj, ctx, raw=json.dumps(obj))))
        return True
    return False


class OpenAIChatStreamParser(StreamParser):
    """``data: {chunk}`` … ``data: [DONE]``; complete on ``[DONE]`` or on a finish reason for
    every choice seen (servers that omit ``[DONE]``)."""

    key: ClassVar[str] = "delta"

    def __init__(self, ctx: ErrorContext) -> None:
        super().__init__(ctx)
        self._finished = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        data = event.data
        if data[:6] == "[DONE]":
            self.done = True
            return []
        if not data.strip():
            return []
        out: list[StreamEvent] = []
        obj = load_json(data, self.ctx, "stream event")
        if event.event == "error" and isinstance(obj, dict) and "error" not in obj:
            obj = {"error": obj}
        if chunk_events(obj, self.key, self.ctx, out):
            self.done = True
        elif not self._finished:
            self._finished = any(type(e) is Finish for e in out)
        return out

    def finish(self) -> list[StreamEvent]:
        if self._finished:
            self.done = True
        return super().finish()


class OpenAIChatAdapter(Adapter):
    """``POST /chat/completions``.

    ``stream_usage`` asks for the final usage chunk (``stream_options.include_usage``; OpenAI
    and most hosted servers, but SillyTavern's custom source does not send it).
    ``max_tokens_field`` is ``max_completion_tokens`` for OpenAI reasoning models.
    """

    name: ClassVar[str] = "openai_chat"
    path: ClassVar[str] = "/chat/completions"

    def __init__(
        self,
        *,
        stream_usage: bool = False,
        max_tokens_field: str = "max_tokens",
        send_reasoning_details: bool = True,
    ) -> None:
        self.stream_usage = stream_usage
        self.max_tokens_field = max_tokens_field
        self.send_reasoning_details = send_reasoning_details

    # -- request ---------------------------------------------------------------------------

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, ChatPrompt):
            raise BadRequest(
                "the chat completions API needs a message list, not a text prompt",
                provider=None,
                model=model,
            )
        vision = profile.supports_vision if profile is not None else True
        downgrades: list[str] = []
        messages = [self._message(m, vision, downgrades) for m in request.messages]
        body: dict[str, Any] = {"messages": messages}
        if model:
            body["model"] = model
        s = request.sampling
        _put(body, "temperature", s.temperature)
        _put(body, self.max_tokens_field, s.max_tokens)
        body["stream"] = stream
        _put(body, "presence_penalty", s.presence_penalty)
        _put(body, "frequency_penalty", s.frequency_penalty)
        _put(body, "top_p", s.top_p)
        _put(body, "top_k", s.top_k)
        _put(body, "top_a", s.top_a)
        _put(body, "min_p", s.min_p)
        _put(body, "repetition_penalty", s.repetition_penalty)
        _put(body, "seed", s.seed)
        _put(body, "n", s.n)
        if s.logit_bias:
            body["logit_bias"] = dict(s.logit_bias)
        if request.stop:
            body["stop"] = list(request.stop)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                        **({"strict": t.strict} if t.strict is not None else {}),
                    },
                }
                for t in request.tools
            ]
            if request.tool_choice is not None:
                body["tool_choice"] = (
                    request.tool_choice
                    if request.tool_choice in ("auto", "none", "required")
                    else {"type": "function", "function": {"name": request.tool_choice}}
                )
        fmt = request.response_format
        if fmt is not None:
            if fmt.schema is None:
                body["response_format"] = {"type": "json_object"}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": fmt.name, "strict": fmt.strict, "schema": fmt.schema},
                }
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        if stream and self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        body.update(s.extra_body)
        return WireRequest("POST", self.path, body, stream=stream, downgrades=tuple(downgrades))

    def _message(self, m: ChatMessage, vision: bool, downgrades: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"role": m.role}
        if isinstance(m.content, str):
            out["content"] = m.content
        else:
            parts: list[dict[str, Any]] = []
            for part in m.content:
                if isinstance(part, WireTextPart):
                    parts.append({"type": "text", "text": part.text})
                elif vision:
                    image: dict[str, Any] = {"url": part.data_url()}
                    if part.detail:
                        image["detail"] = part.detail
                    parts.append({"type": "image_url", "image_url": image})
                else:
                    downgrades.append("image replaced by a text placeholder")
                    parts.append({"type": "text", "text": image_placeholder(part)})
            out["content"] = parts
        if m.name:
            out["name"] = m.name
        if m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in m.tool_calls
            ]
            if not m.text():
                out["content"] = None
        if m.tool_call_id:
            out["tool_call_id"] = m.tool_call_id
        if self.send_reasoning_details and any(b.format for b in m.reasoning_blocks):
            out["reasoning_details"] = [_detail_out(i, b) for i, b in enumerate(m.reasoning_blocks)]
        return out

    # -- responses -------------------------------------------------------------------------

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        obj = load_json(body, ctx)
        out: list[StreamEvent] = []
        chunk_events(obj, "message", ctx, out)
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return OpenAIChatStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        return openai_http_error(status, body, headers, ctx)


def _detail_out(position: int, block: Any) -> dict[str, Any]:
    if block.redacted:
        return {
            "type": "reasoning.encrypted",
            "data": block.data or "",
            "format": block.format,
            "index": position,
        }
    out: dict[str, Any] = {"type": "reasoning.text", "text": block.text}
    if block.signature:
        out["signature"] = block.signature
    out["format"] = block.format
    out["index"] = position
    return out


def _put(body: dict[str, Any], key: str, value: object) -> None:
    if value is not None:
        body[key] = value


def sampling_fields(s: Sampling) -> dict[str, Any]:
    """The OpenAI-style sampler fields that are set (for adapters that reuse the names)."""
    body: dict[str, Any] = {}
    for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "n"):
        _put(body, key, getattr(s, key))
    return body
