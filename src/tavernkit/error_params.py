"""What an error carries so a front end can say it in its user's language: a stable
``code`` (what kind of refusal, snake_case, never reworded) and named ``params`` (the field,
the name, the limit, the line and column...). The English ``message`` stays beside them, for
clients that show the server's text and for codes a client does not know.

Codes of tavernkit errors follow the error's class (``not_found``, ``name_taken``,
``stale_revision``, ``invalid``...); a :class:`~tavernkit.errors.GenerateTaskError` keeps its
own task code (``rate_limit``, ``network``, ``invalid_input``...), which no class code repeats.
Every parameter is something the caller sent or may know (its own record's name, a limit, a
position in its own file); never a secret, never an upstream's text (as the server's answers,
:mod:`tavernkit.server.errors`). The server puts them in its error answers; the CLI words its
errors from them (:mod:`tavernkit.cli.error_text`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from tavernkit.errors import (
    AccessError,
    ChatBusy,
    Conflict,
    CoordinationError,
    EgressRefused,
    FormatError,
    GenerateTaskError,
    HomeNotEmpty,
    LimitExceeded,
    NameTaken,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    SecretKeyError,
    ShuttingDown,
    StaleRevision,
    StoreUnavailable,
    TavernKitError,
    ToolSourceError,
    ToolSourceUnavailable,
    TooManyAttempts,
)

__all__ = ["Params", "error_code", "error_params", "http_params", "validation_params"]

#: a parameter's value: a name, a number or a flag (nothing nested)
Params = dict[str, str | int | float | bool]

#: most specific first: the first class an error is an instance of gives its code
_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (NotAuthenticated, "not_authenticated"),
    (EgressRefused, "egress_refused"),
    (PermissionDenied, "permission_denied"),
    (TooManyAttempts, "too_many_attempts"),
    (NotFound, "not_found"),
    (ChatBusy, "chat_busy"),
    (StaleRevision, "stale_revision"),
    (NameTaken, "name_taken"),
    (HomeNotEmpty, "home_not_empty"),
    (Conflict, "conflict"),
    (LimitExceeded, "too_large"),
    (FormatError, "invalid"),
    (ToolSourceUnavailable, "tool_source_unavailable"),
    (ToolSourceError, "tool_source"),
    (SecretKeyError, "secret_key"),
    (StoreUnavailable, "unavailable"),
    (CoordinationError, "unavailable"),
    (ShuttingDown, "shutting_down"),
)

#: "no connection profile named 'x'", "no chat 'x'", "no message 7 in chat 'x'": what the
#: store and the routes say of a record that is not there (the kind, then the name or number)
_MISSING = re.compile(
    r"^no (?P<kind>[a-z][a-z _-]*?) (?:named )?"
    r"""(?:(?P<q>['"])(?P<name>.*?)(?P=q)|(?P<number>\d+))"""
)
#: the name a "not found" of several kinds gives
_NAMED = re.compile(r"""\bnamed (?P<q>['"])(?P<name>.*?)(?P=q)""")
#: "invalid JSON at line 2, column 26: ..." (an import's or a plugin's file)
_LINE = re.compile(r"\bline (?P<line>\d+),? column (?P<column>\d+)")
#: the numbers a size refusal names: "over the limit of 1000", "larger than 8 MiB",
#: "1200 bytes stored of the 1000 allowed"
_LIMIT = re.compile(r"(?:limit of|larger than|of the) (?P<limit>\d+)(?: (?P<unit>bytes|MiB))?")
#: a pydantic error's context values a client may show (limits and the allowed values)
_CONTEXT = ("min_length", "max_length", "ge", "gt", "le", "lt", "expected", "multiple_of")
#: task error details a client may show (the rest are not parameters of a message)
_TASK_PARAMS = ("field", "value", "retry_after", "quota", "status", "character")


def error_code(exc: BaseException) -> str:
    """The stable code of a tavernkit error's answer (``error`` for a class with none)."""
    if isinstance(exc, GenerateTaskError):
        return exc.code
    if isinstance(exc, LimitExceeded) and exc.field == "storage_quota":
        return "quota"
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return "error"


def error_params(exc: TavernKitError, message: str) -> Params:
    """The named parameters of ``exc``'s answer; ``message`` is the text the answer shows
    (its numbers and names are read from it where the error holds them only there)."""
    params: Params = {}
    field = getattr(exc, "field", None)
    if isinstance(field, str) and field:
        params["field"] = field
    if isinstance(exc, GenerateTaskError):
        params.update(_task_params(exc.details))
    elif isinstance(exc, AccessError):
        params.update(_access_params(exc))
    elif isinstance(exc, NameTaken):
        params.update(kind=exc.kind, name=exc.name)
    elif isinstance(exc, ChatBusy):
        params["chat"] = exc.chat_id
    elif isinstance(exc, NotFound):
        params.update(_missing_params(message))
    elif isinstance(exc, FormatError):
        params.update(_format_params(exc, message))
    elif isinstance(exc, ToolSourceError) and exc.source:
        params["source"] = exc.source
    return params


def validation_params(error: Mapping[str, Any]) -> Params:
    """A request validation error's parameters (pydantic's first error): ``field`` (the
    path, as the answer's ``field``), ``problem`` (pydantic's error type: ``missing``,
    ``string_too_long``, ``greater_than_equal``...) and its limits (``max_length``, ``ge``...).
    The input itself is never one: it may be a password or a key."""
    params: Params = {}
    loc = ".".join(str(part) for part in error.get("loc", ()))
    if loc:
        params["field"] = loc
    problem = error.get("type")
    if isinstance(problem, str):
        params["problem"] = problem
    context = error.get("ctx")
    if isinstance(context, Mapping):
        for key in _CONTEXT:
            value = context.get(key)
            if isinstance(value, bool | int | float | str):
                params[key] = value
    return params


def http_params(status: int, detail: str) -> tuple[str, Params]:
    """The code and parameters of a plain HTTP error (no route, a body over the limit)."""
    if status == 413:
        return "too_large", _limit(detail)
    if status == 404:
        return "not_found", {}
    if status == 405:
        return "method_not_allowed", {}
    return "http_error", {"status": status}


def _task_params(details: Mapping[str, Any]) -> Params:
    params: Params = {}
    for key in _TASK_PARAMS:
        value = details.get(key)
        if key == "retry_after" and isinstance(value, int | float):
            params[key] = max(1, math.ceil(value))
        elif isinstance(value, bool | int | float | str):
            params[key] = value
    return params


def _access_params(exc: AccessError) -> Params:
    params: Params = {}
    if exc.refusal:
        params["reason"] = exc.refusal
    if isinstance(exc, TooManyAttempts):
        params["retry_after"] = max(1, math.ceil(exc.retry_after_s))
    return params


def _missing_params(message: str) -> Params:
    found = _MISSING.match(message)
    if found is None:  # "no character, lorebook or chat named 'x'": the name alone
        named = _NAMED.search(message)
        return {"name": named["name"]} if named is not None else {}
    params: Params = {"kind": found["kind"].replace(" ", "_").replace("-", "_")}
    if found["name"] is not None:
        params["name"] = found["name"]
    else:
        params["name"] = int(found["number"])
    return params


def _format_params(exc: FormatError, message: str) -> Params:
    params: Params = {}
    if exc.source and not exc.source.startswith("<"):  # a file's name, not a label (<bytes>)
        params["source"] = exc.source
    position = _LINE.search(message)
    if position is not None:
        params.update(line=int(position["line"]), column=int(position["column"]))
    if isinstance(exc, LimitExceeded):
        params.update(_limit(message))
    return params


def _limit(message: str) -> Params:
    found = _LIMIT.search(message)
    if found is None:
        return {}
    limit = int(found["limit"])
    if found["unit"] == "MiB":
        limit *= 1024 * 1024
    return {"limit_bytes": limit}
