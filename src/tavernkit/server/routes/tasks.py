"""``POST /tasks``: :func:`~tavernkit.tasks.generate_task` over HTTP, for bots and plugins
written in other languages.

The body holds the same options as the Python call (``task_messages`` and the keywords of
:class:`~tavernkit.tasks.TaskOptions`), plus ``chat_id`` (the chat whose character, persona
and world info the task reads; default: the selections) and ``stream``. The answer is the
normalized :class:`~tavernkit.tasks.TaskResult` as JSON; with ``stream`` it is SSE events
``text``, ``reasoning``, ``tool_call``, then ``result`` (or ``error``). Failures carry the
:class:`~tavernkit.errors.GenerateTaskError` code (:mod:`tavernkit.server.task_errors`). A
task stores nothing, so a client that leaves a stream cancels it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from tavernkit.errors import GenerateTaskError
from tavernkit.server.auth import UserTavern
from tavernkit.server.routes._common import ModelCall
from tavernkit.server.sse import sse_event, sse_response
from tavernkit.server.task_errors import task_error_body, task_error_response
from tavernkit.tasks import (
    TaskDone,
    TaskEvent,
    TaskReasoningDelta,
    TaskResult,
    TaskTextDelta,
    TaskToolCallEvent,
)
from tavernkit.tools.calls import ToolCall

__all__ = ["TaskBody", "TaskResultBody", "router", "task_result_body"]

router = APIRouter(tags=["tasks"])

Json = dict[str, Any]


class TaskBody(BaseModel):
    """The options of ``generate_task`` (see :class:`~tavernkit.tasks.TaskOptions`)."""

    model_config = ConfigDict(extra="forbid")

    task_messages: list[Json] = Field(min_length=1, max_length=2_000)
    chat_id: str | None = Field(None, max_length=200)
    stream: bool = False
    include_character_card: bool = True
    world_info_source: Literal["none", "task", "chat", "custom"] = "none"
    custom_world_info_messages: list[Json] | None = Field(None, max_length=2_000)
    runtime_world_info: Json | None = None
    force_world_info_resimulate: bool = False
    world_info_type: str = Field("quiet", max_length=40)
    api_preset_name: str = Field("", max_length=200)
    llm_preset_name: str = Field("", max_length=200)
    model_override: str = Field("", max_length=200)
    tools: list[Json] | None = Field(None, max_length=128)
    tool_choice: str | Json = "auto"
    json_schema: Json | None = None
    function_call_mode: str = Field("auto", max_length=40)
    function_call_options: Json | None = None
    substitute_macros: bool = True
    response_length: int | None = Field(None, ge=1, le=1_000_000)
    #: run on the utility profile (``PATCH /settings/selections``) when no profile is named
    side_task: bool = False


class ToolCallBody(BaseModel):
    id: str
    name: str
    args: Json


class TaskResultBody(BaseModel):
    assistant_text: str
    tool_calls: list[ToolCallBody]
    json_data: Any = None
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, int | None] | None = None
    model: str | None = None


def tool_call_body(call: ToolCall) -> Json:
    return {"id": call.id, "name": call.name, "args": call.args}


def task_result_body(result: TaskResult) -> Json:
    return {
        "assistant_text": result.assistant_text,
        "tool_calls": [tool_call_body(c) for c in result.tool_calls],
        "json_data": result.json_data,
        "reasoning": result.reasoning,
        "finish_reason": result.finish_reason,
        "usage": result.usage,
        "model": result.model,
    }


@router.post(
    "/tasks",
    response_model=TaskResultBody,
    responses={
        200: {"content": {"text/event-stream": {}}},
        400: {"description": "invalid_input, context_budget or unsupported_api"},
        424: {"description": "auth_missing: the profile has no usable key"},
        429: {"description": "rate_limit"},
        502: {"description": "the upstream failed or answered unusably"},
    },
)
async def run_task(body: TaskBody, tk: UserTavern, caller: ModelCall) -> Any:
    """One ``generate_task`` call: the normalized result, or its events with ``stream``
    (counted against the caller's ``turn_rate``)."""
    chat_id = None
    if body.chat_id:
        chat_id = (await tk.store.get_chat_info(body.chat_id, owner=tk.owner)).id
    ctx = tk.context(chat_id)
    options = body.model_dump(exclude={"task_messages", "chat_id", "stream"})
    try:
        if body.stream:
            stream = ctx.generate_task_stream(body.task_messages, **options)
            return sse_response(_task_frames(stream))
        result = await ctx.generate_task(body.task_messages, **options)
    except GenerateTaskError as exc:
        return task_error_response(exc)
    return task_result_body(result)


async def _task_frames(stream: Any) -> AsyncIterator[bytes]:
    try:
        async for event in stream:
            yield _task_frame(event)
    except GenerateTaskError as exc:
        yield sse_event(None, "error", task_error_body(exc)["error"])
    finally:
        stream.cancel()  # a client that left cancels the task; a finished one is unaffected


def _task_frame(event: TaskEvent) -> bytes:
    if isinstance(event, TaskTextDelta | TaskReasoningDelta):
        return sse_event(None, event.type, {"text": event.text})
    if isinstance(event, TaskToolCallEvent):
        return sse_event(None, "tool_call", tool_call_body(event.call))
    assert isinstance(event, TaskDone)
    return sse_event(None, "result", task_result_body(event.result))
