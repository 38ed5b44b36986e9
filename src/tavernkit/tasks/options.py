"""The options, result and stream events of ``generate_task`` (:mod:`tavernkit.tasks`; the
pipeline that runs them is :mod:`tavernkit.tasks.run`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

from tavernkit.errors import GenerateTaskError
from tavernkit.generation.abort import AbortSignal
from tavernkit.tools.calls import ToolCall
from tavernkit.tools.modes import FunctionCallOptions, resolve_function_call_mode
from tavernkit.tools.registry import FunctionTool, tools_from_specs
from tavernkit.tools.structured import unwrap_json_schema
from tavernkit.tools.validate import normalize_tool_choice
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = [
    "TaskDone",
    "TaskEvent",
    "TaskKeywords",
    "TaskOptions",
    "TaskReasoningDelta",
    "TaskResult",
    "TaskStream",
    "TaskTextDelta",
    "TaskToolCallEvent",
    "WorldInfoSource",
]

WorldInfoSource = Literal["none", "task", "chat", "custom"]
_SOURCES = frozenset(get_args(WorldInfoSource))


@dataclass(frozen=True, slots=True)
class TaskResult:
    """The normalized result of a task, the same shape for every backend.

    ``tool_calls`` holds :class:`~tavernkit.tools.calls.ToolCall` (``name``, ``args`` already
    parsed, ``raw``, ``id``). ``json_data`` is set in schema mode (validated against the
    schema); ``assistant_text`` then holds the raw JSON text. ``usage`` has
    ``prompt_tokens`` / ``completion_tokens`` / ``total_tokens`` (``None`` when the backend
    reported none). ``raw`` is the provider's accumulated
    :class:`~tavernkit.providers.accumulator.Completion`, for debugging.
    """

    assistant_text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    json_data: Any = None
    reasoning: str | None = None
    finish_reason: str | None = "stop"
    usage: dict[str, int] | None = None
    raw: Any = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class TaskTextDelta:
    """Visible reply text (a prompt-protocol payload is never shown)."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class TaskReasoningDelta:
    text: str
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class TaskToolCallEvent:
    """A tool call, parsed and validated (emitted just before the result)."""

    call: ToolCall
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class TaskDone:
    """The last event of a stream: the result."""

    result: TaskResult
    type: Literal["result"] = "result"


TaskEvent = TaskTextDelta | TaskReasoningDelta | TaskToolCallEvent | TaskDone


class TaskKeywords(TypedDict, total=False):
    """``generate_task``'s keyword options (each: :class:`TaskOptions`'s field of that name;
    what they do: :meth:`TavernContext.generate_task`)."""

    include_character_card: bool
    world_info_source: str
    custom_world_info_messages: Sequence[Mapping[str, Any]] | None
    runtime_world_info: WorldInfoResult | Mapping[str, Any] | None
    force_world_info_resimulate: bool
    world_info_type: str
    api_preset_name: str
    llm_preset_name: str
    model_override: str
    tools: Sequence[Mapping[str, Any] | FunctionTool] | None
    tool_choice: Any
    json_schema: Mapping[str, Any] | None
    function_call_mode: str
    function_call_options: Mapping[str, Any] | FunctionCallOptions | None
    abort: AbortSignal | None
    substitute_macros: bool
    response_length: int | None
    side_task: bool


@dataclass
class TaskOptions:
    """Every option of ``generate_task`` (see :meth:`TavernContext.generate_task`)."""

    task_messages: Sequence[Mapping[str, Any]]
    include_character_card: bool = True
    world_info_source: str = "none"
    custom_world_info_messages: Sequence[Mapping[str, Any]] | None = None
    runtime_world_info: WorldInfoResult | Mapping[str, Any] | None = None
    force_world_info_resimulate: bool = False
    world_info_type: str = "quiet"
    api_preset_name: str = ""
    llm_preset_name: str = ""
    model_override: str = ""
    tools: Sequence[Mapping[str, Any] | FunctionTool] | None = None
    tool_choice: Any = "auto"
    json_schema: Mapping[str, Any] | None = None
    function_call_mode: str = "auto"
    function_call_options: Mapping[str, Any] | FunctionCallOptions | None = None
    abort: AbortSignal | None = None
    substitute_macros: bool = True
    #: the most tokens the reply may have (``None``: the preset's, or on a text API the
    #: settings' ``amount_gen``), as ``generate_raw``'s ``response_length``
    response_length: int | None = None
    #: a side task (a summary, a review, a translation): naming no ``api_preset_name``, it
    #: runs on the utility profile when one is set (``TavernContext.for_side_tasks``)
    side_task: bool = False
    # resolved by validate()
    tool_list: list[FunctionTool] = field(default_factory=list)
    call_options: FunctionCallOptions = field(default_factory=FunctionCallOptions)

    @classmethod
    def of(cls, task_messages: Sequence[Mapping[str, Any]], keywords: TaskKeywords) -> TaskOptions:
        """The options of a ``generate_task`` call (not yet validated); a keyword it does not
        take is a ``TypeError``, as for any call."""
        unknown = sorted(set(keywords) - set(TaskKeywords.__annotations__))
        if unknown:
            raise TypeError(f"generate_task() got an unexpected keyword argument {unknown[0]!r}")
        return cls(task_messages, **keywords)

    @property
    def mode(self) -> Literal["json", "tool", "text"]:
        if self.json_schema is not None:
            return "json"
        return "tool" if self.tool_list else "text"

    def validate(self) -> TaskOptions:
        """Check every option that needs no I/O; raises ``invalid_input``. Runs first, so a
        wrong call fails before any profile, store or network is touched."""
        has_tools = bool(self.tools)
        has_schema = self.json_schema is not None
        if has_tools and has_schema:
            raise GenerateTaskError(
                "invalid_input",
                "tools and json_schema are mutually exclusive",
                details={"field": "tools"},
            )
        if self.response_length is not None and (
            isinstance(self.response_length, bool)
            or not isinstance(self.response_length, int)
            or self.response_length < 1
        ):
            raise GenerateTaskError(
                "invalid_input",
                f"response_length must be a positive whole number, not {self.response_length!r}",
                details={"field": "response_length"},
            )
        if self.world_info_source not in _SOURCES:
            raise GenerateTaskError(
                "invalid_input",
                f"Unknown world_info_source: {self.world_info_source!r}",
                details={"field": "world_info_source"},
            )
        if self.world_info_source == "custom" and (
            not isinstance(self.custom_world_info_messages, Sequence)
            or isinstance(self.custom_world_info_messages, str | bytes)
        ):
            raise GenerateTaskError(
                "invalid_input",
                "world_info_source='custom' requires custom_world_info_messages to be a list",
                details={"field": "custom_world_info_messages"},
            )
        if self.runtime_world_info is not None and not isinstance(
            self.runtime_world_info, WorldInfoResult | Mapping
        ):
            raise GenerateTaskError(
                "invalid_input",
                "runtime_world_info must be a WorldInfoResult or its to_st() mapping",
                details={"field": "runtime_world_info"},
            )
        if self.tools is not None and (
            not isinstance(self.tools, Sequence) or isinstance(self.tools, str | bytes)
        ):
            raise GenerateTaskError(
                "invalid_input", "tools must be a list", details={"field": "tools"}
            )
        self.tool_list = tools_from_specs(self.tools or [])
        if has_schema:
            unwrap_json_schema(self.json_schema)
        normalize_tool_choice(self.tool_choice)
        resolve_function_call_mode(self.function_call_mode, native_supported=False)
        self.call_options = FunctionCallOptions.from_mapping(self.function_call_options)
        if self.abort is not None and not isinstance(self.abort, AbortSignal):
            raise GenerateTaskError(
                "invalid_input",
                "abort must be a tavernkit.AbortSignal",
                details={"field": "abort"},
            )
        return self


Emit = Callable[[TaskEvent], Awaitable[None]]
Runner = Callable[[Emit], Awaitable[TaskResult]]


class TaskStream:
    """``generate_task_stream``'s handle: iterate it for events (text, reasoning, tool calls,
    then :class:`TaskDone`), or ``await stream.result()`` for the result alone.

    Events are queued from the start, so none is lost before the consumer attaches. A failure
    raises the same :class:`GenerateTaskError` instance from the iterator and from
    :meth:`result`. Leaving the loop early does not stop the task; :meth:`cancel` does.
    """

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._queue: asyncio.Queue[TaskEvent | BaseException] = asyncio.Queue()
        self._task: asyncio.Task[TaskResult] | None = None

    def _start(self) -> asyncio.Task[TaskResult]:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return self._task

    async def _run(self) -> TaskResult:
        async def emit(event: TaskEvent) -> None:
            self._queue.put_nowait(event)

        try:
            result = await self._runner(emit)
        except BaseException as exc:
            self._queue.put_nowait(exc)
            raise
        self._queue.put_nowait(TaskDone(result))
        return result

    def __aiter__(self) -> AsyncIterator[TaskEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[TaskEvent]:
        task = self._start()
        while True:
            item = await self._queue.get()
            if isinstance(item, BaseException):
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved here; the caller gets it from the iterator
                raise item
            yield item
            if isinstance(item, TaskDone):
                return

    async def result(self) -> TaskResult:
        return await self._start()

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
