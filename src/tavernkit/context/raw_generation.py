"""The lower-level calls: ``generate_raw`` / ``generate_raw_data`` (a literal prompt, no chat,
no card, no world info) and ``generate_quiet_prompt`` (the live chat's prompt with a quiet
instruction at the end).

``generate_raw`` post-processes its text: stop strings cut, reasoning removed (with
auto-parse on, as SillyTavern), names trimmed, whitespace trimmed. ``generate_raw_data`` returns
the response as an OpenAI-shaped body instead (what
:func:`~tavernkit.context.response_message.extract_message_from_data` reads), for callers that
need what the string folds away (reasoning, tool calls, usage).

``quiet_to_loud`` (append the result to the chat) needs the chat service, which owns every
write to a chat; until it lands, asking for it is ``unsupported_api`` rather than a silent
no-op.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tavernkit.context.response_message import completion_to_openai
from tavernkit.errors import GenerateTaskError
from tavernkit.generation.abort import AbortController, AbortSignal
from tavernkit.generation.abort import StreamingProcessor as Processor
from tavernkit.generation.one_request import OneRequestOptions, send_one
from tavernkit.generation.profiles import (
    ResolvedConnection,
    sampling_from_preset,
    sampling_from_textgen,
)
from tavernkit.models.state import ChatState
from tavernkit.prompt import assembled as built
from tavernkit.prompt.convert import RequestExtras, to_provider_request
from tavernkit.prompt.pipeline import PromptSession, PromptTarget, begin
from tavernkit.prompt.raw_prompt import raw_text_prompt
from tavernkit.prompt.reasoning import parse_reasoning
from tavernkit.prompt.state import AuthorsNote, TokenBudgetExceeded
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.request import (
    ChatPrompt,
    PromptRequest,
    ResponseFormat,
    Sampling,
    TextPrompt,
)
from tavernkit.tasks import prompt as tp
from tavernkit.tasks.run import TaskServices
from tavernkit.text.tokens import ByteEstimateTokenizer
from tavernkit.tools.structured import parse_structured, schema_instruction, unwrap_json_schema
from tavernkit.worldinfo.result import WorldInfoResult

__all__ = [
    "QuietOptions",
    "RawOptions",
    "generate_quiet_prompt",
    "generate_raw",
    "generate_raw_data",
]

_CHAT_APIS = frozenset({"openai", "chat", "local"})
_TEXT_APIS = frozenset({"text", "textgenerationwebui", "kobold", "koboldhorde", "novel"})
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]*_~]*")


@dataclass
class RawOptions:
    prompt: str = ""
    api: str | None = None
    instruct_override: bool = False
    quiet_to_loud: bool = False
    system_prompt: str = ""
    response_length: int | None = None
    trim_names: bool = True
    prefill: str = ""
    json_schema: Mapping[str, Any] | None = None
    llm_preset_name: str = ""
    api_preset_name: str = ""
    api_settings_override: Mapping[str, Any] | None = None
    abort: AbortSignal | None = None
    #: stop strings added to the request's own (SillyTavern's ephemeral stopping strings:
    #: a script's ``/genraw stop=[…]``)
    stop: tuple[str, ...] = ()


@dataclass
class QuietOptions:
    quiet_prompt: str = ""
    quiet_to_loud: bool = False
    skip_wian: bool = False
    quiet_image: str | None = None
    quiet_name: str | None = None
    response_length: int | None = None
    force_ch_id: int | str | None = None
    json_schema: Mapping[str, Any] | None = None
    remove_reasoning: bool = True
    trim_to_sentence: bool = False
    abort: AbortSignal | None = None


def _quiet_to_loud_unavailable() -> GenerateTaskError:
    return GenerateTaskError(
        "unsupported_api",
        "quiet_to_loud appends to the chat through the chat service, which is not available "
        "yet; call without quiet_to_loud and store the text yourself",
        details={"field": "quiet_to_loud"},
    )


def _check_api(api: str | None, connection: ResolvedConnection) -> None:
    if api is None or not api.strip():
        return
    wanted = api.strip().lower()
    if wanted not in _CHAT_APIS | _TEXT_APIS:
        raise GenerateTaskError(
            "unsupported_api", f"unknown api {api!r}", details={"field": "api", "value": api}
        )
    family = "chat" if wanted in _CHAT_APIS else "text"
    if family != connection.family:
        raise GenerateTaskError(
            "unsupported_api",
            f"api {api!r} asks for the {family} family but the connection "
            f"{connection.profile.name!r} is {connection.family}",
            details={"field": "api", "value": api},
        )


async def _send_raw(
    services: TaskServices,
    connection: ResolvedConnection,
    request: PromptRequest,
    abort: AbortSignal | None,
) -> Completion:
    controller = AbortController()
    signal = AbortSignal.any(abort, controller.signal)
    with services.generations.track(
        services.chat_id, controller, Processor(model=connection.model)
    ):
        return await send_one(
            connection,
            request,
            stream=False,
            abort=signal,
            plan=await services.plan(connection),
            how=OneRequestOptions(
                retry=services.retry, before_request=services.before_request, turn_id="raw"
            ),
        )


async def _quiet_state(
    services: TaskServices, options: QuietOptions
) -> tuple[ChatState, QuietOptions]:
    """The state the quiet prompt builds from: the chat's, or a group member's view (then
    without ``skip_wian`` and ``quiet_name``, as SillyTavern's group wrapper drops them)."""
    group_state = None
    if services.load_group_state is not None:
        group_state = await services.load_group_state(options.force_ch_id)
    elif options.force_ch_id is not None:
        raise GenerateTaskError(
            "invalid_input",
            "force_ch_id names a group member, and this context has no group chat",
            details={"field": "force_ch_id"},
        )
    if group_state is not None:
        return group_state, dataclasses.replace(options, skip_wian=False, quiet_name=None)
    return await services.load_state(), options


def _quiet_request(
    session: PromptSession,
    wi: WorldInfoResult | None,
    state: ChatState,
    options: QuietOptions,
    quiet_prompt: str,
    fmt: ResponseFormat | None,
    text_family: bool,
) -> tuple[PromptRequest, tuple[str, ...]]:
    """The quiet prompt built and made the provider request; the text prompt's stop
    strings (none for a chat prompt)."""
    if text_family:
        text_prompt = session.build(
            "quiet", wi, quiet_prompt=quiet_prompt, quiet_name=options.quiet_name
        )
        assert isinstance(text_prompt, built.AssembledText)
        stops = tuple(text_prompt.stop)
        settings = state.settings.prompt
        sampling: Sampling = sampling_from_textgen(
            state.textgen_preset,
            max_tokens=options.response_length or settings.amount_gen,
            context_size=settings.max_context,
        )
        return TextPrompt(
            text_prompt.prompt, sampling=sampling, stop=stops, response_format=fmt
        ), stops
    chat_prompt = session.build(
        "quiet",
        wi,
        quiet_prompt=quiet_prompt,
        quiet_image=options.quiet_image,
        inline_images=options.quiet_image is not None,
    )
    assert isinstance(chat_prompt, built.AssembledChat)
    sampling = sampling_from_preset(state.chat_preset, max_tokens=options.response_length)
    extras = RequestExtras(response_format=fmt)
    return to_provider_request(chat_prompt, sampling=sampling, extras=extras), ()


def _schema(value: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, ResponseFormat | None]:
    if value is None:
        return None, None
    schema, name, strict = unwrap_json_schema(value)
    return schema, ResponseFormat(schema, name, strict)


def _cut_stops(text: str, stops: tuple[str, ...]) -> str:
    cut = len(text)
    for stop in stops:
        if stop:
            at = text.find(stop)
            if at != -1:
                cut = min(cut, at)
    return text[:cut]


def _remove_reasoning(text: str, state: ChatState) -> str:
    # SillyTavern's removeReasoningFromString: only with auto-parse on (a fresh home always
    # has a template, SillyTavern's defaults, so the setting is what decides)
    if not state.settings.reasoning.auto_parse or state.reasoning is None:
        return text
    parsed = parse_reasoning(text, state.reasoning)
    return parsed.content if parsed is not None and parsed.reasoning else text


def _trim_names(text: str, names: tuple[str, ...]) -> str:
    for name in names:
        if name and text.startswith(f"{name}:"):
            return text[len(name) + 1 :]
    return text


def _trim_to_sentence(text: str) -> str:
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()] if ends else text


def _structured_text(completion: Completion, schema: dict[str, Any] | None) -> str | None:
    if schema is None:
        return None
    data = parse_structured(completion.text, schema).data
    return json.dumps(data, ensure_ascii=False)


async def _raw_completion(
    services: TaskServices,
    connection: ResolvedConnection,
    options: RawOptions,
) -> tuple[Completion, ChatState, tuple[str, ...], dict[str, Any] | None]:
    if options.quiet_to_loud:
        raise _quiet_to_loud_unavailable()
    _check_api(options.api, connection)
    state = await services.load_state()
    schema, fmt = _schema(options.json_schema)
    native = fmt is not None and connection.native_json_schema
    preset = state.chat_preset
    if options.llm_preset_name.strip() and connection.family == "chat":
        preset = await services.load_preset(options.llm_preset_name.strip())
    messages: list[dict[str, Any]] = []
    if options.system_prompt:
        messages.append({"role": "system", "content": options.system_prompt})
    if schema is not None and not native:
        messages.append({"role": "system", "content": schema_instruction(schema)})
    messages.append({"role": "user", "content": options.prompt})
    if options.prefill:
        messages.append({"role": "assistant", "content": options.prefill})
    stops: tuple[str, ...] = ()
    request: PromptRequest
    if connection.family == "text":
        pstate = tp.prompt_state_for(
            state,
            preset=preset,
            model=connection.model,
            source=connection.source,
            api=connection.api,
            text_family=True,
        )
        substitute = tp.make_substitute(pstate, None, state.compat, state)
        # SillyTavern's createRawPrompt: the system prompt as the story string, the prompt as
        # the user's message, the quiet last line and the prefill (a schema's instruction,
        # which SillyTavern has no text form of, joins the system prompt)
        instruction = schema_instruction(schema) if schema is not None and not native else ""
        raw = raw_text_prompt(
            pstate,
            options.prompt,
            substitute,
            system_prompt="\n\n".join(x for x in (options.system_prompt, instruction) if x),
            prefill=options.prefill,
            # SillyTavern never instruct-formats a raw prompt for NovelAI
            instruct_override=options.instruct_override or connection.api == "novel",
            quiet_to_loud=options.quiet_to_loud,
        )
        prompt = raw.prompt
        stops = tuple(raw.stop) + tuple(x for x in options.stop if x not in raw.stop)
        settings = state.settings.prompt
        sampling = sampling_from_textgen(
            state.textgen_preset,
            max_tokens=options.response_length or settings.amount_gen,
            context_size=settings.max_context,
        )
        request = TextPrompt(
            prompt, sampling=sampling, stop=stops, response_format=fmt if native else None
        )
    else:
        sampling = sampling_from_preset(preset, max_tokens=options.response_length)
        stops = tuple(options.stop)
        request = ChatPrompt(
            messages=tp.to_provider_messages(messages),
            sampling=sampling,
            stop=stops,
            response_format=fmt if native else None,
        )
    completion = await _send_raw(services, connection, request, options.abort)
    return completion, state, stops, schema


def _check_text(completion: Completion) -> None:
    if not completion.text.strip() or (
        completion.usage is not None and completion.usage.output_tokens == 0
    ):
        raise GenerateTaskError(
            "no_response",
            "the model returned an empty reply",
            details={"finish_reason": completion.finish_reason},
        )


async def generate_raw(
    services: TaskServices, connection: ResolvedConnection, options: RawOptions
) -> str:
    """The post-processed reply to a literal prompt (see the module docstring)."""
    completion, state, stops, schema = await _raw_completion(services, connection, options)
    _check_text(completion)
    structured = _structured_text(completion, schema)
    if structured is not None:
        return structured
    text = _cut_stops(completion.text, stops)
    text = _remove_reasoning(text, state)
    if options.trim_names:
        user = state.user_name
        char = state.character.name if state.character is not None else ""
        text = _trim_names(text.lstrip(), (char, user))
    return text.strip()


async def generate_raw_data(
    services: TaskServices, connection: ResolvedConnection, options: RawOptions
) -> dict[str, Any]:
    """The reply to a literal prompt as an OpenAI-shaped response body, unprocessed."""
    completion, _, _, _ = await _raw_completion(services, connection, options)
    return completion_to_openai(completion)


async def generate_quiet_prompt(
    services: TaskServices, connection: ResolvedConnection, options: QuietOptions
) -> str:
    """A background generation on the live chat: history, persona, card and world info
    (unless ``skip_wian``), with ``quiet_prompt`` as the last instruction. World info runs as
    a dry run; nothing is stored."""
    if options.quiet_to_loud:
        raise _quiet_to_loud_unavailable()
    state, options = await _quiet_state(services, options)
    schema, fmt = _schema(options.json_schema)
    native = fmt is not None and connection.native_json_schema
    quiet_prompt = options.quiet_prompt
    if schema is not None and not native:
        quiet_prompt = f"{quiet_prompt}\n\n{schema_instruction(schema)}".strip()
    text_family = connection.family == "text"
    target = PromptTarget.for_connection(
        connection.family,
        connection.api,
        model=connection.model,
        source=connection.source,
        # the text builder's own default: SillyTavern's byte estimate
        tokenizer=ByteEstimateTokenizer() if text_family else None,
    )
    # one evaluator and one evaluation of the card for the scan and the prompt, as in Generate
    session = begin(state, target)
    if options.skip_wian:
        session.prompt_state = session.prompt_state.replace(authors_note=AuthorsNote(prompt=""))
    wi = None
    if not options.skip_wian:
        wi = tp.scan_task_world_info(
            state,
            session.prompt_state,
            None,
            trigger="quiet",
            substitute=session.substitute,
            rng=services.rng,
            compat=state.compat,
            card=session.card,
        )
    try:
        request, stops = _quiet_request(
            session, wi, state, options, quiet_prompt, fmt if native else None, text_family
        )
    except TokenBudgetExceeded as exc:
        raise GenerateTaskError("context_budget", str(exc), cause=exc) from exc
    completion = await _send_raw(services, connection, request, options.abort)
    _check_text(completion)
    structured = _structured_text(completion, schema)
    if structured is not None:
        return structured
    text = _cut_stops(completion.text, stops)
    if options.remove_reasoning:
        text = _remove_reasoning(text, state)
    if options.trim_to_sentence:
        text = _trim_to_sentence(text)
    return text.strip()
