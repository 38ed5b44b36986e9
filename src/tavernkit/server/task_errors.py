"""How a :class:`~tavernkit.errors.GenerateTaskError` leaves the server: its code decides the
status, the body is ``{"error": {"type", "code", "message", "field"?, "details"?, "params"}}``
(``params``: the message's named parameters, :mod:`tavernkit.error_params`).

Upstream failures are the gateway's (502, 504) and a busy upstream is 429 with
``Retry-After``; a missing upstream key is 424 (the request depended on a credential the
server lacks), never 401, which would tell the client its own credentials to this server are
wrong. ``details`` keeps only what the error class documents as safe to show.

The message of an error that came from the upstream is never passed on: a provider's error
text can echo the key it was sent (an admin's shared key, to a user), and a user who points a
profile at some internal service would read that service's answers through it. The client
gets the error's class, code and HTTP status instead (:func:`safe_message`,
:func:`safe_text`), and nothing logs the upstream's text either.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from tavernkit.error_params import error_params
from tavernkit.errors import EgressRefused, GenerateTaskError, ProviderError, TavernKitError

__all__ = [
    "TASK_STATUS",
    "safe_message",
    "safe_text",
    "task_error_body",
    "task_error_response",
]

TASK_STATUS: dict[str, int] = {
    "invalid_input": 400,
    "context_budget": 400,
    "unsupported_api": 400,
    "aborted": 409,
    "auth_missing": 424,
    "rate_limit": 429,
    "network": 502,
    "no_response": 502,
    "tool_call_parse": 502,
    "tool_call_missing": 502,
    "json_schema_violation": 502,
    "unknown": 502,
}

#: the details a client may see (the rejected raw arguments and delivered text can echo the
#: prompt back, which the caller sent anyway; nothing here is a secret)
_SAFE_DETAILS = (
    "field",
    "value",
    "retry_after",
    "quota",
    "status",
    "delivered_text",
    "raw",
    "errors",
)


def safe_message(exc: GenerateTaskError) -> str:
    """``exc``'s message, or its class, code and HTTP status when an upstream wrote it (or
    may have: an exception from outside tavernkit is named by its class only). The egress
    policy's refusal keeps its message: the server wrote it."""
    cause = exc.cause if exc.cause is not None else exc.__cause__
    if isinstance(cause, EgressRefused):
        return str(cause)
    if isinstance(cause, ProviderError):
        status = f", HTTP {cause.status}" if cause.status else ""
        return f"the upstream model failed: {type(cause).__name__} ({exc.code}{status})"
    if cause is not None and not isinstance(cause, TavernKitError | TimeoutError):
        return f"the request failed: {type(cause).__name__} ({exc.code})"
    return exc.message


def safe_text(exc: BaseException) -> str:
    """What a client (or the log) may read of any error: a task error's
    :func:`safe_message`, a provider error's class and HTTP status, a tavernkit error's own
    message (never an upstream's: see :mod:`tavernkit.errors`), anything else's class."""
    if isinstance(exc, GenerateTaskError):
        return safe_message(exc)
    if isinstance(exc, ProviderError) and not isinstance(exc, EgressRefused):
        status = f" (HTTP {exc.status})" if exc.status else ""
        return f"the upstream model failed: {type(exc).__name__}{status}"
    if isinstance(exc, TavernKitError):
        return str(exc)
    return f"the request failed: {type(exc).__name__}"


def task_error_body(exc: GenerateTaskError) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": "GenerateTaskError",
        "code": exc.code,
        "message": safe_message(exc),
    }
    field = exc.details.get("field")
    if isinstance(field, str):
        error["field"] = field
    details = {k: exc.details[k] for k in _SAFE_DETAILS if k in exc.details}
    if details:
        error["details"] = _jsonable(details)
    error["params"] = error_params(exc, error["message"])
    return {"error": error}


def task_error_response(exc: GenerateTaskError) -> JSONResponse:
    headers: dict[str, str] = {}
    retry_after = exc.details.get("retry_after")
    if exc.code == "rate_limit" and isinstance(retry_after, int | float):
        headers["Retry-After"] = str(max(1, round(retry_after + 0.5)))
    return JSONResponse(
        task_error_body(exc), status_code=TASK_STATUS.get(exc.code, 502), headers=headers
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
