"""KoboldAI / KoboldCpp native API: ``/api/v1/generate`` and ``/api/extra/generate/stream``.

- Non-stream: ``{"results": [{"text", "finish_reason", ("prompt_tokens", "completion_tokens",
  "tool_calls" in newer builds)}]}``; the same shape answers ``/api/extra/generate/check``.
- Stream: ``event: message`` / ``data: {"token", "finish_reason"}`` per batch of tokens, and no
  terminator: the connection just closes. Older builds report a stale ``finish_reason`` during
  the stream (and the string ``"null"``), so only the last event's reason is trusted and it is
  emitted at EOF. Without any reason the stream may have been cut: it is not an error (the
  protocol cannot tell), and the completion simply has no finish reason.
- Errors: FastAPI-like ``{"detail": {"msg", "type"}}``, a malformed body being HTTP 500.

The body is the one SillyTavern sends to KoboldAI classic (checked against the conformance
recordings); ``stop_sequence`` is only sent when the server supports it (``stop_sequence=True``,
KoboldCpp) — otherwise dropping the stop strings is reported in ``downgrades``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tavernkit.errors import BadRequest, Overloaded, ProviderError
from tavernkit.providers.base import Adapter, ErrorContext, StreamParser, WireRequest, load_json
from tavernkit.providers.classify import error_payload, openai_family_error
from tavernkit.providers.events import Finish, FinishReason, StreamEvent, TextDelta, Usage
from tavernkit.providers.profiles import ModelProfile
from tavernkit.providers.request import PromptRequest, TextPrompt
from tavernkit.providers.sse import SSEEvent

__all__ = ["KoboldAdapter", "kobold_body"]

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "eos": "stop"}


def kobold_body(request: TextPrompt, *, stop_sequence: bool) -> dict[str, Any]:
    s = request.sampling
    b = s.backend

    def get(key: str, default: Any) -> Any:
        value = b.get(key, default)
        return default if value is None else value

    body: dict[str, Any] = {
        "prompt": request.prompt,
        "use_story": False,
        "use_memory": False,
        "use_authors_note": False,
        "use_world_info": False,
        "max_context_length": s.context_size if s.context_size is not None else 2048,
        "max_length": s.max_tokens if s.max_tokens is not None else 80,
        "rep_pen": s.repetition_penalty if s.repetition_penalty is not None else 1,
        "rep_pen_range": s.repetition_penalty_range if s.repetition_penalty_range else 0,
        "rep_pen_slope": get("rep_pen_slope", 0),
        "temperature": s.temperature if s.temperature is not None else 1,
        "tfs": s.tfs if s.tfs is not None else 1,
        "top_a": s.top_a if s.top_a is not None else 0,
        "top_k": s.top_k if s.top_k is not None else 0,
        "top_p": s.top_p if s.top_p is not None else 1,
        "min_p": s.min_p if s.min_p is not None else 0,
        "typical": s.typical_p if s.typical_p is not None else 1,
        "sampler_order": list(get("sampler_order", [6, 0, 1, 3, 4, 2, 5])),
        "singleline": bool(get("singleline", False)),
        "mirostat": get("mirostat", 0),
        "mirostat_eta": get("mirostat_eta", 0.1),
        "mirostat_tau": get("mirostat_tau", 5),
        "grammar": request.grammar or get("grammar", ""),
    }
    if stop_sequence and request.stop:
        body["stop_sequence"] = list(request.stop)
    if s.seed is not None:
        body["sampler_seed"] = s.seed
    if get("use_default_badwordsids", False):
        body["use_default_badwordsids"] = True
    if request.response_format is not None:
        body["json_schema"] = dict(request.response_format.schema or {"type": "object"})
    body.update(s.extra_body)
    return body


def _results(obj: Any, out: list[StreamEvent]) -> None:
    results = obj.get("results") if isinstance(obj, dict) else None
    if not isinstance(results, list):
        return
    for index, result in enumerate(results):
        if not isinstance(result, dict):
            continue
        if result.get("text"):
            out.append(TextDelta(result["text"], index))
        raw = result.get("finish_reason")
        if raw and raw != "null":
            out.append(Finish(_FINISH.get(raw, "other"), raw, index))
    first = results[0] if results and isinstance(results[0], dict) else {}
    if "prompt_tokens" in first or "completion_tokens" in first:
        out.append(
            Usage(
                input_tokens=first.get("prompt_tokens"),
                output_tokens=first.get("completion_tokens"),
                raw={k: first[k] for k in ("prompt_tokens", "completion_tokens") if k in first},
            )
        )


class KoboldStreamParser(StreamParser):
    def __init__(self, ctx: ErrorContext) -> None:
        super().__init__(ctx)
        self._last_reason: str | None = None
        self.done = True  # the protocol has no terminator; EOF is the end

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        obj = load_json(event.data, self.ctx, "stream event")
        if not isinstance(obj, dict):
            return []
        raw = obj.get("finish_reason")
        self._last_reason = raw if raw and raw != "null" else None
        token = obj.get("token")
        return [TextDelta(token)] if token else []

    def finish(self) -> list[StreamEvent]:
        if self._last_reason is None:
            return []
        return [Finish(_FINISH.get(self._last_reason, "other"), self._last_reason)]


class KoboldAdapter(Adapter):
    """The native KoboldAI API. ``stop_sequence`` says whether the server accepts stop strings
    (KoboldCpp does; KoboldAI classic servers may not)."""

    name: ClassVar[str] = "kobold"

    def __init__(self, *, stop_sequence: bool = True) -> None:
        self.stop_sequence = stop_sequence

    def build_request(
        self,
        request: PromptRequest,
        *,
        model: str | None,
        stream: bool,
        profile: ModelProfile | None = None,
    ) -> WireRequest:
        if not isinstance(request, TextPrompt):
            raise BadRequest("the KoboldAI API needs a text prompt", model=model)
        downgrades: tuple[str, ...] = ()
        if request.stop and not self.stop_sequence:
            downgrades = ("stop strings not sent: the server does not accept stop_sequence",)
        path = "/api/extra/generate/stream" if stream else "/api/v1/generate"
        body = kobold_body(request, stop_sequence=self.stop_sequence)
        return WireRequest("POST", path, body, stream=stream, downgrades=downgrades)

    def parse_response(self, body: bytes, ctx: ErrorContext) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        _results(load_json(body, ctx), out)
        return out

    def stream_parser(self, ctx: ErrorContext) -> StreamParser:
        return KoboldStreamParser(ctx)

    def classify_error(
        self, status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
    ) -> ProviderError:
        payload = error_payload(body)
        error = openai_family_error(status, payload, ctx, raw=body, headers=headers)
        # KoboldCpp answers a malformed request body with 500 "bad_input": our bug, not theirs
        detail = payload.get("detail") if isinstance(payload, dict) else None
        if (
            isinstance(error, Overloaded)
            and isinstance(detail, dict)
            and detail.get("type") == "bad_input"
        ):
            return BadRequest(
                error.reason,
                status=status,
                body=error.body,
                code="bad_input",
                provider=ctx.provider,
                model=ctx.model,
            )
        return error


def parse_version(body: bytes, ctx: ErrorContext) -> tuple[str, str]:
    """``(backend name, version)`` from ``/api/extra/version``."""
    obj = load_json(body, ctx)
    if not isinstance(obj, dict):
        return "", ""
    return str(obj.get("result") or ""), str(obj.get("version") or "")
