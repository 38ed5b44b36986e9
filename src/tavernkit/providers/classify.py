"""Shared pieces of the error tables: scrubbing, ``retry-after``, and the OpenAI-family table.

Each adapter owns its classification; the OpenAI-shaped body
``{"error": {"message", "type", "param", "code"}}`` is shared by OpenAI, OpenRouter, DeepSeek,
Groq, Mistral, xAI, llama.cpp, llama-cpp-python, KoboldCpp and text-generation-webui, so its
table lives here. Rules that matter for policy (reference §1.6):

- ``insufficient_quota`` is a 429 that no retry fixes: :class:`QuotaExhausted` (rotate key);
- ``context_length_exceeded`` / llama.cpp ``exceed_context_size_error`` are
  :class:`ContextTooLong`, whatever the status;
- OpenRouter's real reason is in ``error.metadata.raw``, not the generic message.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    ModelUnavailable,
    NetworkError,
    Overloaded,
    ProtocolError,
    ProviderError,
    QuotaExhausted,
    RateLimited,
)
from tavernkit.providers.base import ErrorContext

__all__ = [
    "body_text",
    "error_payload",
    "make_error",
    "openai_family_error",
    "openai_http_error",
    "parse_retry_after",
    "scrub",
    "status_class",
]

_SECRET_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/=]{8,}"),
    re.compile(r"(?i)([?&](?:key|api_key|apikey)=)[^&\s\"']+"),
    re.compile(r"(?i)((?:x-api-key|x-goog-api-key|api-key)\s*[:=]\s*)[^\s,\"']+"),
)


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without the given secrets or anything shaped like an API key."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    for pattern in _SECRET_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + "***", text)
        else:
            text = pattern.sub("***", text)
    return text


def body_text(body: bytes, limit: int = 8192) -> str:
    text = body[:limit].decode("utf-8", errors="replace")
    return text + "…" if len(body) > limit else text


def error_payload(body: bytes) -> Any:
    """The JSON of an error body, or None when it is none (proxies answer with HTML pages)."""
    try:
        return json.loads(body)
    except ValueError:
        return None


def parse_retry_after(
    headers: Mapping[str, str], *, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``retry-after`` (seconds or HTTP date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    value = lower.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - now(), 0.0)


def make_error(
    cls: type[ProviderError],
    message: str,
    ctx: ErrorContext,
    *,
    status: int | None = None,
    body: bytes | str | None = None,
    code: str | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
    **extra: Any,
) -> ProviderError:
    """Build ``cls`` with everything scrubbed of secrets."""
    text = body_text(body) if isinstance(body, bytes) else body
    return cls(
        scrub(message, ctx.secrets),
        status=status,
        body=scrub(text, ctx.secrets) if text is not None else None,
        code=code,
        request_id=request_id,
        retry_after=retry_after,
        provider=ctx.provider,
        model=ctx.model,
        **extra,
    )


def status_class(status: int | None) -> type[ProviderError]:
    """The class a bare status implies when the body says nothing more precise."""
    if status is None:
        return ProtocolError
    if status in (401, 403):
        return AuthError
    if status == 402:
        return QuotaExhausted
    if status == 404:
        return ModelUnavailable
    if status == 408:
        return NetworkError
    if status == 413:
        return ContextTooLong
    if status == 429:
        return RateLimited
    if status == 409 or status >= 500:
        return Overloaded
    if 400 <= status < 500:
        return BadRequest
    return ProtocolError


_CONTEXT_MESSAGES = re.compile(
    r"maximum context length|context size|context window|prompt is too long|too many tokens"
    r"|reduce the length of the messages|token count .*exceeds",
    re.IGNORECASE,
)
_N_CTX = re.compile(r"maximum context length is (\d+)|context size \((\d+) tokens\)")
_N_PROMPT = re.compile(r"request \((\d+) tokens\)|you requested (\d+) tokens|(\d+) tokens >")
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"})
_AUTH_CODES = frozenset(
    {"invalid_api_key", "authentication_error", "permission_error", "unauthorized", "forbidden"}
)
_FILTER_CODES = frozenset({"content_filter", "content_policy_violation", "content_filtered"})
_MODEL_CODES = frozenset({"model_not_found", "model_not_available", "not_found_error"})
_OVERLOAD_CODES = frozenset(
    {"server_error", "overloaded_error", "api_error", "service_unavailable", "overloaded"}
)


def _first_int(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    if not match:
        return None
    for group in match.groups():
        if group:
            return int(group)
    return None


@dataclass(slots=True)
class _ErrorFields:
    """What an OpenAI-shaped error object says: the status (the body's, when the response
    gave none), the message, the code and type, and the context sizes of a too-long prompt."""

    status: int | None
    message: str = ""
    code: str | None = None
    etype: str = ""
    n_prompt: int | None = None
    n_ctx: int | None = None


def _read_error(payload: Any, status: int | None) -> _ErrorFields:
    """The fields of ``payload``: ``{"error": {...}}``, ``{"error": "text"}``, a FastAPI
    ``{"detail": ...}`` or ``{"message": ...}``."""
    out = _ErrorFields(status)
    err: Any = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(err, dict):
        out.message = str(err.get("message") or "")
        raw_code = err.get("code")
        out.etype = str(err.get("type") or "")
        if isinstance(raw_code, str):
            out.code = raw_code
        elif isinstance(raw_code, int) and out.status is None:
            out.status = raw_code
        if out.status is None and isinstance(err.get("status_code"), int):
            out.status = err["status_code"]
        meta = err.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("raw"), str):
            out.message = f"{out.message}: {meta['raw']}" if out.message else meta["raw"]
        if isinstance(err.get("n_prompt_tokens"), int):
            out.n_prompt = err["n_prompt_tokens"]
        if isinstance(err.get("n_ctx"), int):
            out.n_ctx = err["n_ctx"]
    elif isinstance(err, str):
        out.message = err
    elif isinstance(payload, dict):
        detail = payload.get("detail")
        if isinstance(detail, dict):
            out.message = str(detail.get("msg") or detail)
            out.etype = str(detail.get("type") or "")
        elif detail is not None:
            out.message = str(detail)
        elif isinstance(payload.get("message"), str):
            out.message = payload["message"]
    return out


def _error_class(status: int | None, words: set[str], message: str) -> type[ProviderError]:
    """The error class the codes, the status and the message say."""
    if words & _QUOTA_CODES:
        return QuotaExhausted
    if words & {"context_length_exceeded", "exceed_context_size_error"} or (
        status in (400, 413, None) and _CONTEXT_MESSAGES.search(message)
    ):
        return ContextTooLong
    if words & _AUTH_CODES or status in (401, 403):
        return AuthError
    if words & _FILTER_CODES:
        return ContentFiltered
    if words & _MODEL_CODES or status == 404:
        return ModelUnavailable
    if status == 429 or "rate_limit_exceeded" in words:
        return RateLimited
    if words & _OVERLOAD_CODES and status is None:
        return Overloaded
    return status_class(status) if status is not None else BadRequest


def openai_family_error(
    status: int | None,
    payload: Any,
    ctx: ErrorContext,
    *,
    raw: bytes | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """Classify an OpenAI-shaped error object (an HTTP error body or an in-stream error)."""
    headers = headers or {}
    fields = _read_error(payload, status)
    status, message, code, etype = fields.status, fields.message, fields.code, fields.etype
    n_prompt, n_ctx = fields.n_prompt, fields.n_ctx
    if not message:
        message = body_text(raw) if isinstance(raw, bytes) else (raw or f"HTTP {status}")
    cls = _error_class(status, {w for w in (code, etype) if w}, message)
    extra: dict[str, Any] = {}
    if cls is ContextTooLong:
        extra["n_prompt"] = n_prompt if n_prompt is not None else _first_int(_N_PROMPT, message)
        extra["n_ctx"] = n_ctx if n_ctx is not None else _first_int(_N_CTX, message)
    body = raw if raw is not None else None
    request_id = None
    for name in ("x-request-id", "request-id", "x-groq-id"):
        if name in headers:
            request_id = headers[name]
            break
    return make_error(
        cls,
        message,
        ctx,
        status=status,
        body=body,
        code=code or etype or None,
        request_id=request_id,
        retry_after=parse_retry_after(headers) if headers else None,
        **extra,
    )


def openai_http_error(
    status: int, body: bytes, headers: Mapping[str, str], ctx: ErrorContext
) -> ProviderError:
    """An OpenAI-shaped non-2xx response; a body that is not JSON is classified by status."""
    payload = error_payload(body)
    if payload is None:
        # a proxy's HTML 429 still carries the Retry-After the key's cooldown must honour
        return make_error(
            status_class(status),
            f"HTTP {status}",
            ctx,
            status=status,
            body=body,
            retry_after=parse_retry_after(headers),
        )
    return openai_family_error(status, payload, ctx, raw=body, headers=headers)
