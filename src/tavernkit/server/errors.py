"""How errors leave the server: every tavernkit error as a 4xx JSON body
``{"error": {"type", "message", "field"?, "code", "params"}}`` with the status its class means
(``code`` and ``params``: what a client needs to say the error in its own language,
:mod:`tavernkit.error_params`), request
validation failures as 422 in the same shape, and anything else as a bare 500 that names
nothing (the traceback goes to the log, never to the client). A database or Redis that
cannot serve now (:class:`~tavernkit.errors.StoreUnavailable`,
:class:`~tavernkit.errors.CoordinationError`) is a 503 with ``Retry-After`` and a fixed
message: theirs name the server's address, which only the log gets.

Messages of tavernkit errors never carry secrets (see :mod:`tavernkit.errors`), and an error
an upstream wrote (a provider's, a task's) is shown by its class, code and HTTP status only
(:func:`~tavernkit.server.task_errors.safe_text`); the body uses the error's class name as
``type`` so clients match by type, as Python callers do.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from tavernkit.error_params import (
    Params,
    error_code,
    error_params,
    http_params,
    validation_params,
)
from tavernkit.errors import (
    ChatBusy,
    Conflict,
    CoordinationError,
    FormatError,
    LimitExceeded,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    SecretKeyError,
    ShuttingDown,
    StaleRevision,
    StoreUnavailable,
    TavernKitError,
    ToolSourceUnavailable,
    TooManyAttempts,
)
from tavernkit.server.task_errors import safe_text

__all__ = [
    "ERROR_RESPONSES",
    "ErrorBody",
    "error_body",
    "error_response",
    "install_error_handlers",
    "is_unavailable",
    "status_for",
]

log = logging.getLogger(__name__)

#: most specific first: the first class an error is an instance of gives its status
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (NotAuthenticated, 401),
    (PermissionDenied, 403),
    (NotFound, 404),
    (ChatBusy, 409),
    (Conflict, 409),
    (LimitExceeded, 413),
    (FormatError, 422),
    (TooManyAttempts, 429),
    # an MCP server the user registered failed: the gateway's upstream, not the request
    (ToolSourceUnavailable, 502),
    # the server was not given the secret key its stored API keys were sealed with: its
    # operator's to fix, not the request's (the message names no path and no key)
    (SecretKeyError, 500),
    # the database or Redis is down or out of connections: try again, nothing was wrong
    (StoreUnavailable, 503),
    (CoordinationError, 503),
    (ShuttingDown, 503),
)

#: what a 503 says (the error's own message names the server's address; it is logged)
UNAVAILABLE_MESSAGE = "the server cannot reach its database or shared state now; try again"
#: the ``Retry-After`` of a 503, in seconds
UNAVAILABLE_RETRY_S = 5


class ErrorDetail(BaseModel):
    #: the error's class name (``NotFound``, ``FormatError``...; ``ValidationError`` for a
    #: request that does not match the schema)
    type: str
    message: str
    #: the field at fault, when one is
    field: str | None = None
    #: a stable code for the kind of refusal (``not_found``, ``invalid``, ``stale_revision``,
    #: a task error's ``rate_limit``...), for a client that words it in its own language
    code: str | None = None
    #: the message's named parameters (``field``, ``name``, ``kind``, ``limit_bytes``,
    #: ``line``, ``column``, ``retry_after``...)
    params: dict[str, str | int | float | bool] | None = None
    #: a ``StaleRevision``'s current revision, and what the thing holds now
    revision: str | None = None
    current: dict[str, Any] | None = None


class ErrorBody(BaseModel):
    """What every 4xx and 5xx answer holds."""

    error: ErrorDetail


#: the error answers every route may give, for the OpenAPI schema (422 replaces FastAPI's
#: own validation-error shape, which this server never sends)
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (401, "not signed in"),
        (403, "not allowed"),
        (404, "no such record for this user"),
        (409, "a name is taken, the chat is busy, or a revision is stale"),
        (413, "the request body is over the upload limit"),
        (422, "the input is invalid; ``field`` names what"),
        (429, "a rate limit; see Retry-After"),
        (
            500,
            "the server cannot open its stored API keys (its secret key is not the one they "
            "were sealed with)",
        ),
        (502, "a server this one relies on (an MCP server) failed or did not answer"),
        (503, "the database or Redis is unreachable or busy; see Retry-After"),
    )
}


def status_for(exc: TavernKitError) -> int:
    """The HTTP status of a tavernkit error (400 for classes with no status of their own)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 400


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database or Redis cannot serve now (a 503)."""
    return isinstance(exc, StoreUnavailable | CoordinationError | ShuttingDown)


def error_body(
    type_: str,
    message: str,
    field: str | None = None,
    *,
    code: str | None = None,
    params: Params | None = None,
) -> dict[str, Any]:
    error: dict[str, Any] = {"type": type_, "message": message}
    if field is not None:
        error["field"] = field
    if code is not None:
        error["code"] = code
        error["params"] = dict(params or {})
    return {"error": error}


async def _tavernkit_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TavernKitError)
    return error_response(exc)


def error_response(exc: TavernKitError) -> JSONResponse:
    """The answer to ``exc``: its status, typed body and headers (``Retry-After`` of a 429,
    ``WWW-Authenticate`` of a 401)."""
    if is_unavailable(exc):
        log.warning("answered 503: %s", exc)
        said = str(exc) if isinstance(exc, ShuttingDown) else UNAVAILABLE_MESSAGE
        return JSONResponse(
            error_body(type(exc).__name__, said, code=error_code(exc)),
            status_code=503,
            headers={"Retry-After": str(UNAVAILABLE_RETRY_S)},
        )
    field = getattr(exc, "field", None)
    headers: dict[str, str] = {}
    if isinstance(exc, TooManyAttempts):
        headers["Retry-After"] = str(max(1, round(exc.retry_after_s + 0.5)))
    if isinstance(exc, NotAuthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    said = safe_text(exc)
    body = error_body(
        type(exc).__name__,
        said,
        field if isinstance(field, str) else None,
        code=error_code(exc),
        params=error_params(exc, said),
    )
    if isinstance(exc, StaleRevision):
        body["error"]["revision"] = exc.revision
        if exc.current is not None:
            body["error"]["current"] = exc.current
    return JSONResponse(body, status_code=status_for(exc), headers=headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(part) for part in first.get("loc", ())]
    # the input itself is never echoed: it may be a password or a key
    message = str(first.get("msg", "invalid request"))
    body = error_body(
        "ValidationError",
        message,
        ".".join(loc) or None,
        code="invalid",
        params=validation_params(first),
    )
    return JSONResponse(body, status_code=422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    type_ = "LimitExceeded" if exc.status_code == 413 else "HTTPError"
    code, params = http_params(exc.status_code, str(exc.detail))
    return JSONResponse(
        error_body(type_, str(exc.detail), code=code, params=params),
        status_code=exc.status_code,
        headers=dict(exc.headers or {}),
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # a bug: logged with its type and traceback server-side; the client learns nothing of it
    log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path)
    body = error_body("InternalError", "internal server error", code="internal")
    return JSONResponse(body, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TavernKitError, _tavernkit_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
