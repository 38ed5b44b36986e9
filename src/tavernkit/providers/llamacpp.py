"""llama.cpp server's native ``POST /completion``.

- Body: ``prompt``, ``n_predict`` and llama.cpp's sampler names; JSON-schema output goes as
  ``json_schema`` (the server compiles it to a grammar), a raw GBNF as ``grammar``.
- Response: ``{content, stop, stop_type: eos|word|limit|none, stopping_word, tokens_predicted,
  tokens_evaluated, tokens_cached, truncated, timings, …}``; a stream sends one such object per
  token (``stop: false``) and ends with ``stop: true`` — no ``[DONE]``, so a stream that closes
  before ``stop: true`` was interrupted.
- Errors: ``{"error": {"code", "message", "type"}}``; ``exceed_context_size_error`` carries
  ``n_prompt_tokens`` / ``n_ctx``; 503 while the model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import BadRequest, ProviderError
from tavernkit.providers.base import Adapter, ErrorContext, StreamParser, WireRequest, load_json
from tavernkit.providers.classify import error_payload, openai_family_error
from tavernkit.providers.events import (
    Finish,
    FinishReason,
    ProviderErrorEvent,
    StreamEvent,
    TextDelta,
    Usage,
)
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import PromptRequest, TextPrompt
from tavernkit.providers.sse import SSEEvent
from tavernkit.providers.st_samplers import dry_sequence_breakers

__all__ = ["LlamaCppAdapter"]

_FINISH: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length"}


def _events(obj: Any, out: list[StreamEvent]) -> bool:
    """Events for one object; True when it was the final one."""
    if not isinstance(obj, dict):
        return False
    content = obj.get("content")
    if isinstance(content, str) and content:
        out.append(TextDelta(content))
    if not obj.get("stop"):
        return False
    raw = obj.get("stop_type")
    if obj.get("truncated") and raw in (None, "none", "limit"):
        out.append(Finish("length", "truncated"))
    else:
        out.append(Finish(_FINISH.get(raw or "", "other"), raw))
    if "tokens_evaluated" in obj or "tokens_predicted" in obj:
        out.append(
            Usage(
                input_tokens=obj.get("tokens_evaluated"),
                output_tokens=obj.get("tokens_predicted"),
                cached_input_tokens=obj.get("tokens_cached"),
                raw={
                    k: obj[k]
                    for k in ("tokens_evaluated", "tokens_predicted", "tokens_cached")
                    if k in obj
                },
            )
        )
    return True


class LlamaCppStreamParser(StreamParser):
    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        obj = load_json(event.data, self.ctx, "stream event")
        out: list[StreamEvent] = []
        if isinstance(obj, dict) and obj.get("error"):
            self.done = True
            error = openai_family_error(None, obj, self.ctx, raw=event.data)
            out.append(ProviderErrorEvent(error))
            return out
        if _events(obj, out):
            self.done = True
        return out


class LlamaCppAdapter(Adapter):
    name: ClassVar[str] = "llamacpp"

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, TextPrompt):
            raise BadRequest("llama.cpp /completion needs a text prompt", model=model)
        s = request.sampling
        b = s.backend
        body: dict[str, Any] = {"prompt": request.prompt}
        for key, value in (
            ("n_predict", s.max_tokens),
            ("temperature", s.temperature),
            ("top_k", s.top_k),
            ("top_p", s.top_p),
            ("min_p", s.min_p),
            ("typical_p", s.typical_p),
            ("repeat_penalty", s.repetition_penalty),
            ("repeat_last_n", s.repetition_penalty_range),
            ("presence_penalty", s.presence_penalty),
            ("frequency_penalty", s.frequency_penalty),
            ("seed", s.seed),
        ):
            if value is not None:
                body[key] = value
        for key, name in (
            ("mirostat_mode", "mirostat"),
            ("mirostat_tau", "mirostat_tau"),
            ("mirostat_eta", "mirostat_eta"),
            ("dry_multiplier", "dry_multiplier"),
            ("dry_base", "dry_base"),
            ("dry_allowed_length", "dry_allowed_length"),
            ("dry_penalty_last_n", "dry_penalty_last_n"),
            ("xtc_probability", "xtc_probability"),
            ("xtc_threshold", "xtc_threshold"),
        ):
            if b.get(key) is not None:
                body[name] = b[key]
        if b.get("dry_sequence_breakers") is not None:
            body["dry_sequence_breakers"] = dry_sequence_breakers(b["dry_sequence_breakers"])
        if request.stop:
            body["stop"] = list(request.stop)
        if request.grammar:
            body["grammar"] = request.grammar
        elif request.response_format is not None:
            body["json_schema"] = dict(request.response_format.schema or {"type": "object"})
        body["stream"] = stream
        body["cache_prompt"] = True
        body.update(s.extra_body)
        return WireRequest("POST", "/completion", body, stream=stream)

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        _events(load_json(body, ctx), out)
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return LlamaCppStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        payload = error_payload(body)
        return openai_family_error(status, payload, ctx, raw=body, headers=headers)
