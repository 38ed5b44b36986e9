"""How a :class:`~tavernkit.errors.GenerateTaskError` leaves the server: its code decides the
status, the body is ``{"error": {"type", "code", "message", "field"?, "details"?}}``.

Upstream failures are the gateway's (502, 504) and a busy upstream is 429 with
``Retry-After``; a missing upstream key is 424 (the request depended on a credential the
server lacks), never 401, which would tell the client its own credentials to this server are
wrong. ``details`` keeps only what the error class documents as safe to show.

The message of an error that came from the upstream is never passed on: a provider's error
text can echo the key it was sent (an admin's shared key, to a user), so the client gets the
error's class and code instead; the operator's log has the rest.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from tavernkit.errors import GenerateTaskError, ProviderError

__all__ = ["TASK_STATUS", "safe_message", "task_error_body", "task_error_response"]

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
    """``exc``'s message, or its class and code when the upstream wrote it."""
    cause = exc.cause if exc.cause is not None else exc.__cause__
    if isinstance(cause, ProviderError):
        return f"the upstream model failed: {type(cause).__name__} ({exc.code})"
    return exc.message


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
