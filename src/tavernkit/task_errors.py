"""Any exception as a :class:`~tavernkit.errors.GenerateTaskError`, decided by its type.

``generate_task`` and SillyTavern's request API report one error type with one ``code`` a
caller switches on (:data:`~tavernkit.errors.GenerateTaskErrorCode`);
:func:`task_error_from` is the one place that maps the rest of the exception tree
(:mod:`tavernkit.errors`) onto those codes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tavernkit.errors import (
    AuthError,
    BadRequest,
    ContentFiltered,
    ContextTooLong,
    FormatError,
    GenerateTaskError,
    GenerateTaskErrorCode,
    MissingCredential,
    ModelUnavailable,
    NetworkError,
    Overloaded,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    QuotaExhausted,
    RateLimited,
    RequestAborted,
    StreamInterrupted,
)

__all__ = ["task_error_from"]


#: The map from the provider error tree to task codes, most specific class first (a subclass
#: must come before its base). Decisions that are not obvious:
#:
#: * ``QuotaExhausted`` -> ``rate_limit``: for a caller both mean "this key cannot serve now";
#:   ``details["quota"]`` tells them apart (a quota will not recover by waiting).
#: * ``Overloaded`` (5xx, 529) -> ``network``: the service failed to answer; like a network
#:   failure it is transient and worth a later retry, and it is not the caller's rate.
#: * ``ContextTooLong`` -> ``context_budget``: the prompt does not fit the model's window.
#: * ``ModelUnavailable`` -> ``unsupported_api``: the resolved model cannot serve the request.
#: * ``BadRequest`` -> ``invalid_input``: the request itself is wrong; retrying cannot help.
#: * ``ContentFiltered`` -> ``no_response``: the backend returned nothing usable.
#: * ``ProtocolError`` -> ``unknown``: bytes we could not read say nothing about the cause.
#: * ``StreamInterrupted`` -> its classified ``cause``'s code when it has one, else
#:   ``network``; the text delivered so far is in ``details["delivered_text"]``.
_PROVIDER_CODES: tuple[tuple[type[ProviderError], GenerateTaskErrorCode], ...] = (
    (MissingCredential, "auth_missing"),
    (AuthError, "auth_missing"),
    (QuotaExhausted, "rate_limit"),
    (RateLimited, "rate_limit"),
    (ContextTooLong, "context_budget"),
    (ModelUnavailable, "unsupported_api"),
    (BadRequest, "invalid_input"),
    (ContentFiltered, "no_response"),
    (ProviderTimeout, "network"),
    (NetworkError, "network"),
    (Overloaded, "network"),
    (ProtocolError, "unknown"),
)


def _provider_details(exc: ProviderError) -> dict[str, Any]:
    details: dict[str, Any] = {}
    for key in ("status", "provider", "model", "request_id"):
        value = getattr(exc, key)
        if value is not None:
            details[key] = value
    if exc.code is not None:
        details["provider_code"] = exc.code
    details["retryable"] = bool(exc.retryable)
    return details


def _provider_code(exc: ProviderError) -> GenerateTaskErrorCode:
    for cls, code in _PROVIDER_CODES:
        if isinstance(exc, cls):
            return code
    return "unknown"


def task_error_from(exc: BaseException) -> GenerateTaskError:
    """The :class:`GenerateTaskError` for any exception, decided by its type only.

    A ``GenerateTaskError`` comes back unchanged (never double-wrapped). Cancellation and
    abort types give ``aborted``; ``TimeoutError`` gives ``network``; a ``FormatError`` gives
    ``invalid_input``; provider errors map through the table above (``retry_after`` and the
    status land in ``details``); anything else is ``unknown``. The message text of ``exc``
    is copied for people, never inspected.
    """
    if isinstance(exc, GenerateTaskError):
        return exc
    err: GenerateTaskError
    if isinstance(exc, asyncio.CancelledError | RequestAborted):
        err = GenerateTaskError("aborted", "request aborted", cause=exc)
    elif isinstance(exc, StreamInterrupted):
        inner = exc.cause
        code = _provider_code(inner) if inner is not None else "network"
        details = _provider_details(inner) if inner is not None else _provider_details(exc)
        details["delivered_text"] = exc.delivered_text
        if inner is not None and inner.retry_after is not None:
            details["retry_after"] = inner.retry_after
        err = GenerateTaskError(code, f"stream interrupted: {exc}", cause=exc, details=details)
    elif isinstance(exc, ProviderError):
        code = _provider_code(exc)
        details = _provider_details(exc)
        if code == "rate_limit":
            details["retry_after"] = exc.retry_after
            details["quota"] = isinstance(exc, QuotaExhausted)
        if isinstance(exc, ContextTooLong):
            details["n_prompt"] = exc.n_prompt
            details["n_ctx"] = exc.n_ctx
        err = GenerateTaskError(code, str(exc), cause=exc, details=details)
    elif isinstance(exc, TimeoutError):
        err = GenerateTaskError("network", f"timed out: {exc}", cause=exc)
    elif isinstance(exc, FormatError):
        details = {k: v for k, v in (("source", exc.source), ("field", exc.field)) if v}
        err = GenerateTaskError("invalid_input", str(exc), cause=exc, details=details)
    else:
        err = GenerateTaskError("unknown", f"generate_task failed: {exc!r}", cause=exc)
    err.__cause__ = exc
    return err
