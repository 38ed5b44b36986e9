"""The ``generate_task`` pipeline (see :mod:`tavernkit.tasks.options` for the steps).

Collaborators come in through :class:`TaskServices` (the context builds it from its store and
settings), so the pipeline itself holds no global state and tests can inject each one.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tavernkit.tasks.prompt as tp
from tavernkit.errors import GenerateTaskError
from tavernkit.generation.abort import AbortController, AbortSignal, ActiveGenerations
from tavernkit.generation.abort import StreamingProcessor as Processor
from tavernkit.generation.attempt.sending import BeforeRequest
from tavernkit.generation.one_request import OneRequestOptions, send_one
from tavernkit.generation.plan import Plan
from tavernkit.generation.profiles import (
    ResolvedConnection,
    sampling_from_preset,
    sampling_from_textgen,
)
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import SinkEvent
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.state import ChatState
from tavernkit.prompt.macros import MacroSubstitute
from tavernkit.prompt.reasoning import parse_reasoning
from tavernkit.prompt.state import PromptState
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from tavernkit.providers.request import (
    ChatPrompt,
    PromptRequest,
    ResponseFormat,
    TextPrompt,
    ToolSpec,
)
from tavernkit.providers.retry import RetryPolicy
from tavernkit.tasks.options import (
    Emit,
    TaskOptions,
    TaskReasoningDelta,
    TaskResult,
    TaskStream,
    TaskTextDelta,
    TaskToolCallEvent,
)
from tavernkit.text.render import PromptRenderer
from tavernkit.tools import protocol_for
from tavernkit.tools.calls import ToolCall, coerce_tool_call
from tavernkit.tools.capability import is_tool_calling_supported
from tavernkit.tools.errors import ToolCallParseError
from tavernkit.tools.modes import make_trigger_signal, resolve_function_call_mode
from tavernkit.tools.protocol import PromptProtocol
from tavernkit.tools.scan import StreamDetector
from tavernkit.tools.structured import parse_structured, schema_instruction, unwrap_json_schema
from tavernkit.tools.validate import (
    ToolChoiceSpec,
    enforce_tool_choice,
    is_tool_call_mandatory,
    normalize_tool_choice,
    resolve_required_function_name,
    validate_calls,
)
from tavernkit.worldinfo.result import DepthGroup, ExampleEntry, WorldInfoResult

__all__ = [
    "TaskServices",
    "generate_task",
    "generate_task_stream",
    "run_task",
    "world_info_from_mapping",
]

log = logging.getLogger("tavernkit.tasks")


@dataclass
class TaskServices:
    """What one task needs from its context."""

    load_state: Callable[[], Awaitable[ChatState]]
    resolve_connection: Callable[[str, str], Awaitable[ResolvedConnection]]
    load_preset: Callable[[str], Awaitable[ChatCompletionPreset | None]]
    generations: ActiveGenerations = field(default_factory=ActiveGenerations)
    chat_id: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    rng: random.Random = field(default_factory=random.Random)
    before_request: BeforeRequest | None = None
    #: the plan a request on a connection runs (the chat turn's: key pool, cooldowns,
    #: fallback chain); ``None``: the connection alone
    plan_for: Callable[[ResolvedConnection], Awaitable[Plan]] | None = None
    #: the chat preset bound to a connection's profile (``profile add --preset``), used when
    #: the task names no ``llm_preset_name``; ``None``: profiles bind no preset
    bound_preset: Callable[[ResolvedConnection], Awaitable[ChatCompletionPreset | None]] | None = (
        None
    )
    #: a group chat's quiet-generation state, as the member ``force_ch_id`` names (or the
    #: last speaker) sees the chat; ``None`` back for a solo chat
    load_group_state: Callable[[int | str | None], Awaitable[ChatState | None]] | None = None
    #: the Tavern's renderer: its providers and the plugins' macros evaluate the task's macros
    renderer: PromptRenderer | None = None

    async def plan(self, connection: ResolvedConnection) -> Plan | None:
        return await self.plan_for(connection) if self.plan_for is not None else None


def world_info_from_mapping(data: Mapping[str, Any]) -> WorldInfoResult:
    """A :class:`WorldInfoResult` from its ``to_st()`` shape (a snapshot that went through
    JSON); the activated list keeps only keys, which is all a prompt build reads."""

    def strs(key: str) -> tuple[str, ...]:
        return tuple(str(x) for x in data.get(key) or ())

    return WorldInfoResult(
        before=str(data.get("worldInfoBefore") or ""),
        after=str(data.get("worldInfoAfter") or ""),
        examples=tuple(
            ExampleEntry(int(e.get("position", 0)), str(e.get("content", "")))
            for e in data.get("EMEntries") or ()
        ),
        depth=tuple(
            DepthGroup(g.get("depth"), g.get("role"), tuple(g.get("entries") or ()), "depth" in g)
            for g in data.get("WIDepthEntries") or ()
        ),
        an_top=strs("ANBeforeEntries"),
        an_bottom=strs("ANAfterEntries"),
        outlets={k: tuple(v) for k, v in (data.get("outletEntries") or {}).items()},
    )


class _TaskSink:
    """The turn runner's sink for a streamed task: visible text and reasoning become task
    events (through the prompt protocol's detector, which hides a tool-call payload)."""

    def __init__(self, out: Emit, detector: StreamDetector | None) -> None:
        self.out = out
        self.detector = detector

    async def emit(self, event: SinkEvent) -> None:
        if isinstance(event, TextDelta):
            text = event.text
            shown = self.detector.feed(text) if self.detector is not None else text
            if shown:
                await self.out(TaskTextDelta(shown))
        elif isinstance(event, ReasoningDelta) and event.text:
            await self.out(TaskReasoningDelta(event.text))

    async def flush(self) -> None:
        return None

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


@dataclass
class _Run:
    options: TaskOptions
    services: TaskServices
    state: ChatState
    connection: ResolvedConnection
    preset: ChatCompletionPreset | None
    pstate: PromptState
    substitute: MacroSubstitute
    emit: Emit | None
    signal: AbortSignal
    processor: Processor
    stream: bool
    protocol: PromptProtocol | None = None
    choice: ToolChoiceSpec = field(default_factory=ToolChoiceSpec)
    required: str | None = None
    schema: dict[str, Any] | None = None
    native_schema: bool = False
    schema_name: str = "response"
    schema_strict: bool = True
    last: Completion | None = None

    @property
    def text_family(self) -> bool:
        return self.connection.family == "text"

    # -- request -----------------------------------------------------------------------------

    def request(self, messages: Sequence[Mapping[str, Any]], *, tools: bool) -> PromptRequest:
        fmt = None
        if self.schema is not None and self.native_schema:
            fmt = ResponseFormat(self.schema, self.schema_name, self.schema_strict)
        if self.text_family:
            prompt, stop = tp.fold_messages(messages, self.pstate, self.substitute)
            settings = self.state.settings.prompt
            sampling = sampling_from_textgen(
                self.state.textgen_preset,
                max_tokens=self.options.response_length or settings.amount_gen,
                context_size=settings.max_context,
            )
            return TextPrompt(prompt, sampling=sampling, stop=tuple(stop), response_format=fmt)
        native = tools and self.protocol is None and bool(self.options.tool_list)
        choice: str | None = None
        if native:
            choice = self.choice.name if self.choice.mode == "named" else self.choice.mode
        return ChatPrompt(
            messages=tp.to_provider_messages(messages),
            sampling=sampling_from_preset(self.preset, max_tokens=self.options.response_length),
            tools=tuple(
                ToolSpec(t.name, t.description, dict(t.parameters)) for t in self.options.tool_list
            )
            if native
            else (),
            tool_choice=choice,
            response_format=fmt,
        )

    # -- events ------------------------------------------------------------------------------

    def observe(self, event: StreamEvent) -> None:
        """The live view (``ctx.streaming_processor``) of every provider event."""
        processor = self.processor
        kind = type(event)
        if kind is TextDelta:
            processor.text += event.text  # type: ignore[union-attr]
        elif kind is ReasoningDelta:
            processor.reasoning += event.text  # type: ignore[union-attr]
        elif kind is ToolCallDelta:
            assert isinstance(event, ToolCallDelta)
            while len(processor.tool_calls) <= event.index:
                processor.tool_calls.append(("", ""))
            name, args = processor.tool_calls[event.index]
            processor.tool_calls[event.index] = (
                name or event.name or "",
                args + event.arguments_fragment,
            )

    async def send(
        self, messages: Sequence[Mapping[str, Any]], *, tools: bool, stream: bool
    ) -> Completion:
        """One request through the turn runner's one-attempt plan; the visible reply goes
        to the stream's consumer (a prompt protocol's payload hidden by its detector)."""
        shown = stream and self.emit is not None
        detector = self.protocol.detector() if (self.protocol and shown) else None
        request = self.request(messages, tools=tools)
        if self.stream and stream and not self.connection.can_stream(request):
            raise GenerateTaskError(
                "unsupported_api",
                f"the {self.connection.source} backend cannot stream this request",
                details={"api": self.connection.api, "source": self.connection.source},
            )
        sink = _TaskSink(self.emit, detector) if shown and self.emit is not None else None
        completion = await send_one(
            self.connection,
            request,
            stream=stream,
            abort=self.signal,
            sink=sink,
            plan=await self.services.plan(self.connection),
            how=OneRequestOptions(
                on_event=self.observe,
                retry=self.services.retry,
                before_request=self.services.before_request,
                # a tool call or a JSON document cannot be stitched from two replies
                continuation=self.options.mode == "text",
            ),
        )
        if detector is not None:
            tail = detector.finish()
            if tail and self.emit is not None:
                await self.emit(TaskTextDelta(tail))
        self.last = completion
        return completion

    # -- normalization -----------------------------------------------------------------------

    def _reasoning(self, completion: Completion) -> tuple[str, str | None]:
        text, reasoning = completion.text, completion.reasoning or None
        template = self.state.reasoning
        if reasoning is None and template is not None and self.state.settings.reasoning.auto_parse:
            parsed = parse_reasoning(text, template)
            if parsed is not None and parsed.reasoning:
                return parsed.content, parsed.reasoning
        return text, reasoning

    def _check_reply(self, completion: Completion) -> None:
        usage = completion.usage
        if usage is not None and usage.output_tokens == 0:
            raise GenerateTaskError(
                "no_response",
                "the backend reported zero completion tokens",
                details={"finish_reason": completion.finish_reason},
            )

    def result(
        self, completion: Completion, text: str, reasoning: str | None, **kw: Any
    ) -> TaskResult:
        usage = completion.usage
        usage_dict = None
        if usage is not None:
            pairs = {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.total_tokens,
                "cached_tokens": usage.cached_input_tokens,
                "reasoning_tokens": usage.reasoning_tokens,
            }
            usage_dict = {k: v for k, v in pairs.items() if v is not None} or None
        finish = kw.pop("finish_reason", None) or completion.finish_reason or "stop"
        return TaskResult(
            assistant_text=text,
            reasoning=reasoning,
            finish_reason=finish,
            usage=usage_dict,
            raw=completion,
            model=completion.model or self.connection.model,
            **kw,
        )


async def _resolve_world_info(
    run_opts: TaskOptions,
    state: ChatState,
    pstate: PromptState,
    compat: str,
    rng: random.Random,
    renderer: PromptRenderer | None = None,
) -> WorldInfoResult | None:
    snapshot = run_opts.runtime_world_info
    if snapshot and not run_opts.force_world_info_resimulate:
        if isinstance(snapshot, WorldInfoResult):
            return snapshot
        return world_info_from_mapping(snapshot)
    source = run_opts.world_info_source
    if source == "none":
        return None
    if source == "chat" and state.chat is None:
        raise GenerateTaskError(
            "invalid_input",
            "world_info_source='chat' needs a chat: open the context with tk.context(chat_id)",
            details={"field": "world_info_source"},
        )
    messages: Sequence[Mapping[str, Any]] | None
    if source == "task":
        messages = run_opts.task_messages
    elif source == "custom":
        messages = tp.validate_task_messages(run_opts.custom_world_info_messages)
    else:
        messages = None
    substitute = tp.make_substitute(pstate, None, compat, state, renderer)
    return tp.scan_task_world_info(
        state,
        pstate,
        messages,
        trigger=run_opts.world_info_type,
        substitute=substitute,
        rng=rng,
        compat=compat,
    )


async def run_task(services: TaskServices, options: TaskOptions, emit: Emit | None) -> TaskResult:
    """Run one task (``options`` already validated); ``emit`` receives stream events."""
    task_messages = tp.validate_task_messages(options.task_messages)
    state = await services.load_state()
    connection = await services.resolve_connection(
        options.api_preset_name.strip(), options.model_override
    )
    preset = state.chat_preset
    if services.bound_preset is not None:
        preset = await services.bound_preset(connection) or preset
    if options.llm_preset_name.strip():
        if connection.family != "chat":
            log.warning(
                "llm_preset_name=%r ignored on the text-completion family (%s)",
                options.llm_preset_name,
                connection.api,
            )
        else:
            preset = await services.load_preset(options.llm_preset_name.strip())
    compat = state.compat
    pstate = tp.connection_prompt_state(state, connection, preset)
    wi = await _resolve_world_info(options, state, pstate, compat, services.rng, services.renderer)
    substitute = tp.make_substitute(pstate, wi, compat, state, services.renderer)
    if options.substitute_macros:
        task_messages = tp.substitute_task_messages(
            task_messages, substitute, compat, services.renderer
        )
    messages = tp.build_envelope(
        pstate,
        wi,
        task_messages,
        include_character_card=options.include_character_card,
        substitute=substitute,
        compat=compat,
    )

    controller = AbortController()
    signal = AbortSignal.any(options.abort, controller.signal)
    processor = Processor(model=connection.model)
    run = _Run(
        options=options,
        services=services,
        state=state,
        connection=connection,
        preset=preset,
        pstate=pstate,
        substitute=substitute,
        emit=emit,
        signal=signal,
        processor=processor,
        stream=emit is not None,
    )
    with services.generations.track(services.chat_id, controller, processor):
        try:
            result = await _dispatch_mode(run, messages)
        except BaseException:
            processor.state = "aborted" if signal.aborted else "failed"
            raise
        processor.state = "finished"
    if emit is not None:
        for call in result.tool_calls:
            await emit(TaskToolCallEvent(call))
    return result


def _wire_stream(run: _Run) -> bool:
    if run.stream:
        return True
    if run.connection.family == "chat" and run.preset is not None:
        return bool(run.preset.stream_openai)
    return False


async def _dispatch_mode(run: _Run, messages: list[dict[str, Any]]) -> TaskResult:
    options = run.options
    if options.mode == "json":
        return await _json_task(run, messages)
    if options.mode == "tool":
        return await _tool_task(run, messages)
    completion = await run.send(messages, tools=False, stream=_wire_stream(run))
    run._check_reply(completion)
    text, reasoning = run._reasoning(completion)
    if not text.strip():
        raise GenerateTaskError(
            "no_response",
            "the model returned an empty reply",
            details={"finish_reason": completion.finish_reason},
        )
    return run.result(completion, text, reasoning)


async def _json_task(run: _Run, messages: list[dict[str, Any]]) -> TaskResult:
    schema, name, strict = unwrap_json_schema(run.options.json_schema)
    run.schema, run.schema_name, run.schema_strict = schema, name, strict
    run.native_schema = run.connection.native_json_schema
    if not run.native_schema:
        messages = [*messages, {"role": "system", "content": schema_instruction(schema)}]
    completion = await run.send(messages, tools=False, stream=_wire_stream(run))
    run._check_reply(completion)
    text, reasoning = run._reasoning(completion)
    structured = parse_structured(text, schema)
    return run.result(completion, text, reasoning, json_data=structured.data)


def _prepare_tools(run: _Run, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    options = run.options
    tools = options.tool_list
    run.choice = normalize_tool_choice(options.tool_choice)
    run.required = resolve_required_function_name(
        run.choice, options.call_options.required_function_name
    )
    names = [t.name for t in tools]
    for wanted in (run.choice.name, run.required):
        if wanted and wanted not in names:
            raise GenerateTaskError(
                "invalid_input",
                f"required tool {wanted!r} is not among the tools of this request",
                details={"field": "tool_choice", "name": wanted},
            )
    caps = run.connection.capabilities
    mode = resolve_function_call_mode(
        options.function_call_mode,
        native_supported=is_tool_calling_supported(caps),
        force_plain_text=caps.force_plain_text,
    )
    if mode == "native":
        if not is_tool_calling_supported(caps):
            raise GenerateTaskError(
                "unsupported_api",
                f"{run.connection.source} model {run.connection.model!r} has no native tool "
                "calling; use function_call_mode='prompt_xml' or 'prompt_json', or set the "
                "profile's capabilities.supports_tools",
                details={"function_call_mode": "native", "model": run.connection.model},
            )
        return messages
    trigger = options.call_options.trigger_signal or make_trigger_signal(run.services.rng)
    run.protocol = protocol_for(mode, trigger, style=options.call_options.protocol_style)
    rewritten = run.protocol.rewrite_history(messages)
    instructions = run.protocol.instructions(
        tools, tool_choice=run.choice, required_function_name=run.required
    )
    return run.protocol.insert_instructions(rewritten, instructions)


async def _tool_task(run: _Run, messages: list[dict[str, Any]]) -> TaskResult:
    messages = _prepare_tools(run, messages)
    tools = run.options.tool_list
    mandatory = is_tool_call_mandatory(run.choice, run.required)
    completion = await run.send(messages, tools=True, stream=_wire_stream(run))
    run._check_reply(completion)
    text, reasoning = run._reasoning(completion)
    protocol = run.protocol
    if protocol is None:
        calls = _native_calls(completion)
        validate_calls(calls, tools)
        display = text
    else:

        async def resend(history: list[dict[str, Any]]) -> str:
            again = await run.send(history, tools=False, stream=False)
            return run._reasoning(again)[0]

        try:
            parsed = await protocol.parse_with_retries(
                text,
                tools,
                messages,
                resend,
                mandatory=mandatory,
                required_function_name=run.required,
                max_retries=run.options.call_options.max_retries,
            )
        except ToolCallParseError as exc:
            if exc.problem == "missing_trigger":
                raise GenerateTaskError(
                    "tool_call_missing",
                    f"a tool call was required but the model made none: {exc.message}",
                    cause=exc,
                    details=exc.details,
                ) from exc
            raise
        calls, display = list(parsed.calls), parsed.display_text
        completion = run.last or completion
    if not calls and mandatory:
        enforce_tool_choice(calls, run.choice, required_function_name=run.required)
    calls = enforce_tool_choice(
        calls, run.choice, required_function_name=run.required, available=[t.name for t in tools]
    )
    if not calls and not display.strip():
        raise GenerateTaskError(
            "no_response",
            "the model returned neither text nor a tool call",
            details={"finish_reason": completion.finish_reason},
        )
    finish = "tool_calls" if calls else None
    return run.result(completion, display, reasoning, tool_calls=calls, finish_reason=finish)


def _native_calls(completion: Completion) -> list[ToolCall]:
    calls = []
    for index, call in enumerate(completion.tool_calls):
        if call.truncated:
            raise ToolCallParseError(
                "bad_json",
                f"tool call {call.name!r} was cut off (finish_reason=length) before its "
                "arguments were complete",
                name=call.name,
                raw_arguments=call.arguments,
            )
        calls.append(coerce_tool_call(call, index))
    return calls


async def generate_task(services: TaskServices, options: TaskOptions) -> TaskResult:
    """Run a task to its result (``options`` are validated first). The context's
    :meth:`~tavernkit.context.TavernContext.generate_task` is the keyword-argument face of
    this."""
    return await run_task(services, options.validate(), None)


def generate_task_stream(services: TaskServices, options: TaskOptions) -> TaskStream:
    """A :class:`TaskStream` of the task. Validation runs here, synchronously, so a wrong
    call fails at the call site rather than at the first ``async for``."""
    options.validate()

    async def runner(emit: Emit) -> TaskResult:
        return await run_task(services, options, emit)

    return TaskStream(runner)
