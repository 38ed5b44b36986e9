"""The OpenAI-compatible facade: ``GET /v1/models``, ``GET /v1/models/{id}`` and
``POST /v1/chat/completions`` (streaming and not), for the official clients and for front
ends such as SillyTavern (see :mod:`tavernkit.server.openai_facade` for what a model is).

Everything answers as OpenAI does, errors included: ``{"error": {"message", "type",
"param", "code"}}`` with the status code the clients map to their exception classes (400,
401, 403, 404, 429, 5xx), also for a missing token or a malformed body, which the rest of the
server answers in its own shape. A stream is ``data:`` chunks (``chat.completion.chunk``,
each with a ``choices`` array), the last one with ``finish_reason`` and ``usage``, then a
usage chunk with empty ``choices`` when ``stream_options.include_usage`` asks for one, then
``data: [DONE]``. An error after the stream started is a ``data: {"error": ...}`` chunk, as
OpenAI sends it. A stream only starts once the first piece of the reply (or the whole reply)
is there, so a request that fails at once gets its real status code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from tavernkit.errors import (
    GenerateTaskError,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    TavernKitError,
    TooManyAttempts,
)
from tavernkit.facade import Tavern
from tavernkit.server.auth import current_principal, tavern_for
from tavernkit.server.openai_facade import (
    Delta,
    FacadeCompletion,
    FacadeModel,
    complete,
    completion_id,
    list_models,
    now,
    resolve_model,
)
from tavernkit.server.sse import sse_data, sse_response
from tavernkit.server.state import state_of
from tavernkit.server.task_errors import TASK_STATUS, safe_message, safe_text

__all__ = ["FACADE_PREFIX", "ChatCompletionRequest", "OpenAIError", "router", "too_large_body"]

log = logging.getLogger(__name__)

#: the paths the facade answers; every error under them is in OpenAI's shape
FACADE_PREFIX = "/v1/"

router = APIRouter(prefix=FACADE_PREFIX.rstrip("/"), tags=["openai"])


@dataclass(frozen=True)
class OpenAIError:
    """An error answered in OpenAI's shape (a value, not an exception: every error the
    routes raise is a tavernkit one, turned into this by :func:`openai_error`)."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def _type_for(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "api_error"
    return "invalid_request_error"


def openai_error(exc: BaseException) -> OpenAIError:
    """``exc`` as OpenAI would say it (a bug is a bare 500 naming nothing)."""
    if isinstance(exc, GenerateTaskError):
        status = TASK_STATUS.get(exc.code, 502)
        name = exc.details.get("field")
        headers: dict[str, str] = {}
        retry_after = exc.details.get("retry_after")
        if exc.code == "rate_limit" and isinstance(retry_after, int | float):
            headers["Retry-After"] = str(max(1, round(retry_after + 0.5)))
        return OpenAIError(
            status,
            safe_message(exc),
            type=_type_for(status),
            param=name if isinstance(name, str) else None,
            code=exc.code,
            headers=headers,
        )
    if isinstance(exc, NotAuthenticated):
        return OpenAIError(
            401,
            str(exc),
            type="invalid_request_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if isinstance(exc, PermissionDenied):
        return OpenAIError(403, str(exc), type="permission_error", code="permission_denied")
    if isinstance(exc, TooManyAttempts):
        retry = str(max(1, round(exc.retry_after_s + 0.5)))
        return OpenAIError(
            429,
            str(exc),
            type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": retry},
        )
    if isinstance(exc, NotFound):
        return OpenAIError(404, str(exc), param="model", code="model_not_found")
    if isinstance(exc, TavernKitError):
        return OpenAIError(400, safe_text(exc), code=type(exc).__name__)
    if isinstance(exc, HTTPException):  # BodyLimit cut the body off while it arrived (413)
        status = exc.status_code
        code = _TOO_LARGE if status == 413 else None
        return OpenAIError(status, str(exc.detail), type=_type_for(status), code=code)
    log.error("unhandled %s in the OpenAI facade", type(exc).__name__)
    return OpenAIError(500, "internal server error", type="api_error", code="internal_error")


_TOO_LARGE = "request_too_large"


def too_large_body(message: str) -> dict[str, Any]:
    """The facade's 413 for a body refused on its ``Content-Length`` (``BodyLimit``)."""
    return OpenAIError(413, message, code=_TOO_LARGE).body()


class ChatCompletionRequest(BaseModel):
    """The chat-completion request fields the facade reads; others are accepted and ignored,
    as clients send many."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=400)
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=10_000)
    stream: bool = False
    #: ``{"include_usage": true}`` asks for a usage chunk (a plain mapping, so the OpenAPI
    #: document needs no definitions of its own)
    stream_options: dict[str, bool] | None = None
    n: int | None = Field(None, ge=1, le=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    seed: int | None = None
    stop: str | list[str] | None = None
    tools: list[dict[str, Any]] | None = Field(None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None


async def _user_tavern(request: Request) -> Tavern:
    return await tavern_for(request)


async def _request_body(request: Request) -> ChatCompletionRequest | OpenAIError:
    """The request, or the 400 that says what is wrong with it (never echoing the input)."""
    try:
        # pydantic parses and validates the bytes in one pass (no dict of dicts made first)
        return ChatCompletionRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        first = exc.errors()[0]
        if first.get("type") == "json_invalid":
            return OpenAIError(400, "the request body is not valid JSON", code="invalid_json")
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        missing = first.get("type") == "missing"
        message = f"{param}: {first.get('msg')}" if param else str(first.get("msg"))
        code = "missing_required_parameter" if missing else "invalid_value"
        return OpenAIError(400, message, param=param, code=code)


def _model_entry(model: FacadeModel) -> dict[str, Any]:
    return {"id": model.id, "object": "model", "created": model.created, "owned_by": model.kind}


@router.get("/models")
async def models(request: Request) -> Response:
    """The owner's characters and connection profiles as models."""
    try:
        tk = await _user_tavern(request)
        data = [_model_entry(m) for m in await list_models(tk)]
    except Exception as exc:
        return openai_error(exc).response()
    return JSONResponse({"object": "list", "data": data})


@router.get("/models/{model:path}")
async def model(model: str, request: Request) -> Response:
    try:
        tk = await _user_tavern(request)
        found = await resolve_model(tk, model)
    except Exception as exc:
        return openai_error(exc).response()
    return JSONResponse(_model_entry(found))


_REQUEST_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": ChatCompletionRequest.model_json_schema()}},
    }
}


@router.post("/chat/completions", openapi_extra=_REQUEST_SCHEMA)
async def chat_completions(request: Request) -> Response:
    """A chat completion on a character or a connection profile, streamed or not."""
    try:
        state = state_of(request)
        principal = await current_principal(request)
        await state.admit_turn(principal)  # first: a request that then fails counts too
        tk = state.tavern_for(principal)
        body = await _request_body(request)
        if isinstance(body, OpenAIError):
            return body.response()
        found = await resolve_model(tk, body.model)
        fields = body.model_dump(exclude_none=True)
        items = complete(tk, found, fields, stream=body.stream)
        if not body.stream:
            result = await _last(items)
            return JSONResponse(_completion_body(completion_id(), body.model, result))
        first = await anext(items)  # fails here with its real status, before any 200
    except Exception as exc:
        return openai_error(exc).response()
    include_usage = bool((body.stream_options or {}).get("include_usage"))
    return sse_response(_chunks(items, first, body.model, include_usage), ping_s=None)


async def _last(items: AsyncIterator[Delta | FacadeCompletion]) -> FacadeCompletion:
    async for item in items:
        if isinstance(item, FacadeCompletion):
            return item
    raise GenerateTaskError("no_response", "the model returned nothing")


def _completion_body(cid: str, model: str, result: FacadeCompletion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.text}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    if result.tool_calls:
        message["tool_calls"] = result.tool_calls
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion",
        "created": now(),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason}],
    }
    body["usage"] = _usage(result)
    return body


def _usage(result: FacadeCompletion) -> dict[str, int]:
    usage = result.usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    total = int(usage.get("total_tokens") or prompt + completion)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


class ChunkFrames:
    """The ``data:`` frames of one streamed completion, ``id``, ``created`` and ``model``
    fixed. A delta chunk is the same bytes as ``sse_data`` of the whole chunk, made from a
    prefix encoded once (a stream encodes only each chunk's delta)."""

    def __init__(self, cid: str, created: int, model: str) -> None:
        self.head = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        whole = sse_data({**self.head, "choices": [{"index": 0, "delta": {}}]})
        self._prefix = whole[: whole.index(b'"delta":') + len(b'"delta":')]

    def chunk(self, delta: dict[str, Any]) -> bytes:
        encoded = json.dumps(delta, separators=(",", ":")).encode()
        return b'%s%s,"finish_reason":null}]}\n\n' % (self._prefix, encoded)

    def last(self, finish: str, usage: dict[str, int]) -> bytes:
        choice = {"index": 0, "delta": {}, "finish_reason": finish}
        return sse_data({**self.head, "choices": [choice], "usage": usage})

    def usage(self, usage: dict[str, int]) -> bytes:
        return sse_data({**self.head, "choices": [], "usage": usage})


async def _chunks(
    items: AsyncIterator[Delta | FacadeCompletion],
    first: Delta | FacadeCompletion,
    model: str,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    frames = ChunkFrames(completion_id(), now(), model)
    # the role chunk goes out with the first piece: one write, one packet
    pending = [frames.chunk({"role": "assistant", "content": ""})]
    try:
        item: Delta | FacadeCompletion | None = first
        while item is not None:
            if isinstance(item, Delta):
                if item.reasoning:
                    pending.append(frames.chunk({"reasoning_content": item.reasoning}))
                if item.text:
                    pending.append(frames.chunk({"content": item.text}))
            else:
                if item.tool_calls:
                    calls = [{"index": i, **call} for i, call in enumerate(item.tool_calls)]
                    pending.append(frames.chunk({"tool_calls": calls}))
                usage = _usage(item)
                pending.append(frames.last(item.finish_reason, usage))
                if include_usage:
                    pending.append(frames.usage(usage))
                break
            if pending:
                yield b"".join(pending)
                pending = []
            item = await anext(items, None)
    except Exception as exc:
        # the stream has started: OpenAI sends the error as a chunk of its own
        pending.append(sse_data({**openai_error(exc).body(), "choices": []}))
    finally:
        await items.aclose()  # type: ignore[attr-defined]
    pending.append(sse_data("[DONE]"))
    yield b"".join(pending)
