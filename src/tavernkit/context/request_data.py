"""The shared parts of the request primitives (:mod:`tavernkit.context.request_primitives`) and the
service classes (:mod:`tavernkit.context.service_classes`): request data -> provider request,
resolution through the context, and the one-attempt send with the request-scope hooks."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavernkit.context.port import RequestPort
from tavernkit.context.response_message import completion_to_openai
from tavernkit.errors import GenerateTaskError
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.hooks import REQUEST_SCOPES, RequestScope, chat_turn_hooks
from tavernkit.generation.one_request import OneRequestOptions, send_one
from tavernkit.generation.profiles import (
    ResolvedConnection,
    sampling_from_preset,
    sampling_from_textgen,
)
from tavernkit.generation.result import TurnResult
from tavernkit.generation.sink import SinkEvent
from tavernkit.models.templates import InstructTemplate
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.events import ReasoningDelta, TextDelta
from tavernkit.providers.request import (
    ChatPrompt,
    PromptRequest,
    ResponseFormat,
    Sampling,
    TextPrompt,
    ToolSpec,
)
from tavernkit.tasks import prompt as tp
from tavernkit.tools.modes import FunctionCallOptions
from tavernkit.tools.registry import tools_from_specs
from tavernkit.tools.structured import unwrap_json_schema
from tavernkit.tools.validate import normalize_tool_choice

__all__ = ["StreamChunk", "construct_prompt"]

#: request-data keys that are samplers (``Sampling`` field names, SillyTavern's spelling)
_SAMPLER_KEYS = {
    "max_tokens": "max_tokens",
    "max_length": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "top_a": "top_a",
    "min_p": "min_p",
    "typical_p": "typical_p",
    "tfs": "tfs",
    "repetition_penalty": "repetition_penalty",
    "rep_pen": "repetition_penalty",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "seed": "seed",
    "n": "n",
}


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """One step of a streamed request: ``text``/``reasoning`` so far and the new ``delta``;
    the last chunk has ``done`` and the OpenAI-shaped ``response``."""

    text: str
    delta: str = ""
    reasoning: str = ""
    done: bool = False
    response: dict[str, Any] | None = None


def _scope(value: str) -> RequestScope:
    if value not in REQUEST_SCOPES:
        raise GenerateTaskError(
            "invalid_input",
            f"request_scope must be one of {', '.join(REQUEST_SCOPES)}",
            details={"field": "request_scope"},
        )
    return value


def _sampling(base: Sampling, data: Mapping[str, Any]) -> Sampling:
    changes = {
        field: data[key]
        for key, field in _SAMPLER_KEYS.items()
        if data.get(key) is not None and not isinstance(data.get(key), bool)
    }
    return dataclasses.replace(base, **changes) if changes else base


def _response_format(schema: Any) -> ResponseFormat | None:
    if schema is None:
        return None
    body, name, strict = unwrap_json_schema(schema)
    return ResponseFormat(body, name, strict)


def _stops(data: Mapping[str, Any]) -> tuple[str, ...]:
    stop = data.get("stop") or data.get("stop_sequence") or ()
    return (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)


def _tools(
    tools: Sequence[Any] | None, tool_choice: Any, options: FunctionCallOptions
) -> tuple[tuple[ToolSpec, ...], str | None]:
    specs = tools_from_specs(tools or [])
    if not specs:
        return (), None
    choice = normalize_tool_choice(tool_choice)
    if options.required_function_name:
        choice = normalize_tool_choice({"name": options.required_function_name})
    name = choice.name if choice.mode == "named" else choice.mode
    return tuple(ToolSpec(t.name, t.description, dict(t.parameters)) for t in specs), name


class _Sender:
    """What every primitive shares: the context, resolution and the send itself."""

    def __init__(self, ctx: RequestPort) -> None:
        self.ctx = ctx

    async def connection(
        self, api_preset_name: str = "", override: Any = None, model: str = ""
    ) -> ResolvedConnection:
        return await self.ctx.resolve_named(api_preset_name.strip(), model, override)

    async def chat_sampling(
        self, llm_preset_name: str, data: Mapping[str, Any], include_preset: bool = True
    ) -> Sampling:
        if not include_preset:
            return _sampling(Sampling(), data)
        if llm_preset_name.strip():
            preset = await self.ctx.preset_named(llm_preset_name.strip())
        else:
            preset = (await self.ctx.chat_state()).chat_preset
        return _sampling(sampling_from_preset(preset), data)

    async def text_sampling(self, data: Mapping[str, Any]) -> Sampling:
        state = await self.ctx.chat_state()
        settings = state.settings.prompt
        base = sampling_from_textgen(
            state.textgen_preset, max_tokens=settings.amount_gen, context_size=settings.max_context
        )
        return _sampling(base, data)

    async def send(
        self,
        connection: ResolvedConnection,
        request: PromptRequest,
        *,
        kind: str,
        scope: RequestScope,
        stream: bool,
        abort: AbortSignal | None,
        on_delta: OnDelta | None = None,
    ) -> Completion:
        ctx = self.ctx
        hooks = chat_turn_hooks(ctx.runtime.plugins, scope)
        request = hooks.before(ctx.chat_id, kind, request)

        def after(result: TurnResult) -> None:
            hooks.after(ctx.chat_id, kind, result)

        sink = _DeltaSink(on_delta) if on_delta is not None else None
        return await send_one(
            connection,
            request,
            stream=stream,
            abort=abort,
            sink=sink,
            plan=await ctx.plan_for(connection),
            how=OneRequestOptions(
                retry=ctx.retry,
                before_request=ctx.request_hooks(scope),
                continuation=False,
                owner=ctx.runtime.owner,
                turn_id=f"request:{kind}",
                on_result=after,
            ),
        )


#: what a streamed request hands each text or reasoning piece to, in place
OnDelta = Callable[[TextDelta | ReasoningDelta], None]


class _DeltaSink:
    """The pieces of a streamed request to ``on_delta``. It never blocks, so it offers
    ``emit_nowait``: delivery calls it in place, with no queue or worker task between the
    provider's read and ``on_delta``."""

    def __init__(self, on_delta: OnDelta) -> None:
        self.on_delta = on_delta

    def emit_nowait(self, event: SinkEvent) -> None:
        if isinstance(event, TextDelta | ReasoningDelta):
            self.on_delta(event)

    async def emit(self, event: SinkEvent) -> None:
        self.emit_nowait(event)

    async def flush(self) -> None:
        return None

    async def finalize(self, result: TurnResult) -> None:
        return None

    async def cleanup(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Presets:
    """Which connection and sampling a request uses: the sampling preset by name, the
    connection profile by name or an override, and whether the preset's samplers apply
    (``False``: only the request data's own)."""

    llm_preset_name: str = ""
    api_preset_name: str = ""
    api_settings_override: Any = None
    include_preset: bool = True


@dataclass(frozen=True, slots=True)
class _ToolOffer:
    """The tools a request offers, the choice among them and the function-call options."""

    tools: Sequence[Any] | None = None
    tool_choice: Any = "auto"
    function_call_options: Any = None


async def _chat_request(
    sender: _Sender,
    messages: Sequence[Mapping[str, Any]],
    presets: _Presets,
    offer: _ToolOffer,
    data: Mapping[str, Any],
) -> tuple[ResolvedConnection, ChatPrompt]:
    tools, tool_choice = offer.tools, offer.tool_choice
    function_call_options = offer.function_call_options
    llm_preset_name, api_preset_name = presets.llm_preset_name, presets.api_preset_name
    api_settings_override, include_preset = presets.api_settings_override, presets.include_preset
    options = FunctionCallOptions.from_mapping(function_call_options)
    connection = await sender.connection(
        api_preset_name, api_settings_override, str(data.get("model") or "")
    )
    if connection.family != "chat":
        raise GenerateTaskError(
            "unsupported_api",
            f"connection {connection.profile.name!r} is a text-completion backend; use "
            "send_generation_request or TextCompletionService",
            details={"api": connection.api},
        )
    specs, choice = _tools(tools, tool_choice, options)
    request = ChatPrompt(
        tp.to_provider_messages(tp.validate_task_messages(messages)),
        sampling=await sender.chat_sampling(llm_preset_name, data, include_preset),
        stop=_stops(data),
        tools=specs,
        tool_choice=choice,
        response_format=_response_format(data.get("json_schema")),
    )
    return connection, request


async def _stream_chunks(
    sender: _Sender,
    connection: ResolvedConnection,
    request: PromptRequest,
    *,
    kind: str,
    scope: RequestScope,
    abort: AbortSignal | None,
) -> AsyncIterator[StreamChunk]:
    queue: asyncio.Queue[StreamChunk | BaseException] = asyncio.Queue()
    text: list[str] = []
    reasoning: list[str] = []

    def on_delta(event: TextDelta | ReasoningDelta) -> None:
        if isinstance(event, TextDelta):
            text.append(event.text)
            queue.put_nowait(StreamChunk("".join(text), event.text, "".join(reasoning)))
        else:
            reasoning.append(event.text)

    async def run() -> None:
        try:
            completion = await sender.send(
                connection,
                request,
                kind=kind,
                scope=scope,
                stream=True,
                abort=abort,
                on_delta=on_delta,
            )
        except BaseException as exc:
            queue.put_nowait(exc)
            return
        queue.put_nowait(
            StreamChunk(
                completion.text,
                "",
                completion.reasoning or "".join(reasoning),
                done=True,
                response=completion_to_openai(completion),
            )
        )

    task = asyncio.ensure_future(run())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if item.done:
                return
    finally:
        if not task.done():
            task.cancel()


def _as_messages(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = data.get("messages")
    if messages is not None:
        return list(messages)
    return [{"role": "user", "content": str(data.get("prompt") or "")}]


async def _text_prompt(
    sender: _Sender, data: Mapping[str, Any], instruct: InstructTemplate | None = None
) -> TextPrompt:
    prompt = data.get("prompt")
    stops = _stops(data)
    if not isinstance(prompt, str):
        folded, fold_stops = await construct_prompt(sender.ctx, _as_messages(data), instruct)
        prompt, stops = folded, stops or tuple(fold_stops)
    return TextPrompt(
        prompt,
        sampling=await sender.text_sampling(data),
        stop=stops,
        response_format=_response_format(data.get("json_schema")),
        grammar=data.get("grammar") if isinstance(data.get("grammar"), str) else None,
    )


async def construct_prompt(
    ctx: RequestPort,
    messages: Sequence[Mapping[str, Any]],
    instruct: InstructTemplate | str | None = None,
    instruct_settings: Mapping[str, Any] | None = None,
) -> tuple[str, list[str]]:
    """``messages`` folded into one text-completion prompt and its stop strings: the instruct
    template (given, named, else the selected one; ``instruct_settings`` override its fields;
    ``{"enabled": False}`` gives ``Name: text`` lines)."""
    state = await ctx.chat_state()
    connection = await ctx.resolve_named("")
    pstate = tp.prompt_state_for(
        state,
        preset=state.chat_preset,
        model=connection.model,
        source=connection.source,
        api="text",
        text_family=True,
    )
    template = instruct
    if isinstance(template, str):
        loaded = await ctx.runtime.store.get("instruct", template, owner=ctx.runtime.owner)
        template = loaded if isinstance(loaded, InstructTemplate) else None
    template = template or pstate.instruct
    settings = dict(instruct_settings or {})
    enabled = bool(settings.pop("enabled", template is not None))
    if template is not None and settings:
        template = InstructTemplate.model_validate({**template.to_wire(), **settings})
    pstate = pstate.replace(instruct=template, instruct_enabled=enabled and template is not None)
    substitute = tp.make_substitute(pstate, None, state.compat, state)
    return tp.fold_messages(tp.validate_task_messages(messages), pstate, substitute)
