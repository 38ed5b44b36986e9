"""NovelAI text generation (``/ai/generate``, ``/ai/generate-stream``).

No public recordings exist (the API is paid); the shapes come from the reference: the body is
``{input, model, parameters{…}}``, the answer ``{"output": "…"}``, the stream SSE events whose
JSON carries ``token``, and errors ``{statusCode?, message}``. The stream has no terminator;
a ``final: true`` event, when present, marks the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ModelUnavailable,
    Overloaded,
    ProviderError,
    QuotaExhausted,
    RateLimited,
)
from tavernkit.providers.base import Adapter, ErrorContext, StreamParser, WireRequest, load_json
from tavernkit.providers.classify import error_payload, make_error, parse_retry_after
from tavernkit.providers.events import Finish, StreamEvent, TextDelta
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import PromptRequest, TextPrompt
from tavernkit.providers.sse import SSEEvent

__all__ = ["NovelAIAdapter"]

_STATUS: dict[int, type[ProviderError]] = {
    400: BadRequest,
    401: AuthError,
    402: QuotaExhausted,
    403: AuthError,
    404: ModelUnavailable,
    409: Overloaded,
    429: RateLimited,
}


class NovelAIStreamParser(StreamParser):
    def __init__(self, ctx: ErrorContext) -> None:
        super().__init__(ctx)
        self.done = True  # no terminator in the protocol

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        obj = load_json(event.data, self.ctx, "stream event")
        if not isinstance(obj, dict):
            return []
        out: list[StreamEvent] = []
        if obj.get("token"):
            out.append(TextDelta(obj["token"]))
        if obj.get("final"):
            out.append(Finish("stop", "final"))
        return out


class NovelAIAdapter(Adapter):
    name: ClassVar[str] = "novelai"

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, TextPrompt):
            raise BadRequest("NovelAI needs a text prompt", model=model)
        s = request.sampling
        params: dict[str, Any] = {}
        for key, value in (
            ("temperature", s.temperature),
            ("max_length", s.max_tokens),
            ("top_k", s.top_k),
            ("top_p", s.top_p),
            ("top_a", s.top_a),
            ("typical_p", s.typical_p),
            ("tail_free_sampling", s.tfs),
            ("min_p", s.min_p),
            ("repetition_penalty", s.repetition_penalty),
            ("repetition_penalty_range", s.repetition_penalty_range),
            ("repetition_penalty_presence", s.presence_penalty),
            ("repetition_penalty_frequency", s.frequency_penalty),
        ):
            if value is not None:
                params[key] = value
        params.update(
            {k: v for k, v in s.backend.items() if k not in params and not isinstance(v, dict)}
        )
        if request.stop:
            # NovelAI takes stop sequences as token ids; the strings travel for the server-side
            # proxy that tokenizes them, and stop handling is also done client side.
            params["stop_sequences_text"] = list(request.stop)
        body: dict[str, Any] = {"input": request.prompt, "model": model, "parameters": params}
        body.update(s.extra_body)
        path = "/ai/generate-stream" if stream else "/ai/generate"
        return WireRequest("POST", path, body, stream=stream)

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        obj = load_json(body, ctx)
        out: list[StreamEvent] = []
        if isinstance(obj, dict) and obj.get("output"):
            out.append(TextDelta(obj["output"]))
            out.append(Finish("stop", None))
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return NovelAIStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        payload = error_payload(body)
        message = ""
        if isinstance(payload, dict):
            message = str(payload.get("message") or payload.get("error") or "")
        cls = _STATUS.get(status) or (Overloaded if status >= 500 else BadRequest)
        return make_error(
            cls,
            message or f"HTTP {status}",
            ctx,
            status=status,
            body=body,
            retry_after=parse_retry_after(headers),
        )
