"""The primitives beneath ``generate_task``, for callers that need control (streaming, rewriting a
request between retries, a non-standard pipeline), and the three service classes of the
reference front end. All thin: each one resolves a connection and a preset, builds a provider
request and sends it through the same one-attempt turn (:func:`send_one`), so hooks, retries,
abort and error codes are those of every other call.

- :func:`send_chat_request` (``sendOpenAIRequest``): messages as given (no envelope, no world
  info, no macros) to a chat-family connection; an explicit ``api_settings_override`` beats the
  named profile, the named preset gives only samplers. ``request_scope="main"`` runs the main
  chat's hooks around it; ``"extension_internal"`` skips them. Returns an OpenAI-shaped body.
- :func:`send_streaming_request`: the same, as an async generator of :class:`StreamChunk`.
- :func:`send_generation_request`: routes by API family (messages to chat, a prompt string to
  text; each folded or wrapped into the other's shape when needed).
- :class:`ChatCompletionService` / :class:`TextCompletionService` (``create_request_data``,
  ``send_request``, ``process_request``; ``construct_prompt`` folds messages into one instruct
  string) and :class:`ConnectionManagerRequestService` (send through a profile by name,
  whatever profile is active).

Request data are plain dicts with SillyTavern's keys (``messages`` or ``prompt``, ``model``,
``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``min_p``, ``frequency_penalty``,
``presence_penalty``, ``repetition_penalty``, ``seed``, ``stop``, ``stream``, ``tools``,
``tool_choice``, ``json_schema``), so code written against the reference ports directly.
Only native tool calling here: the prompt protocols belong to ``generate_task``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from tavernkit.context.port import RequestPort
from tavernkit.context.request_data import (
    StreamChunk,
    _as_messages,
    _chat_request,
    _Presets,
    _scope,
    _Sender,
    _stream_chunks,
    _text_prompt,
    _ToolOffer,
    construct_prompt,
)
from tavernkit.context.response_message import completion_to_openai
from tavernkit.context.service_classes import (
    ChatCompletionService,
    ConnectionManagerRequestService,
    TextCompletionService,
)
from tavernkit.errors import GenerateTaskError
from tavernkit.generation.abort import AbortSignal
from tavernkit.models.profile import ConnectionProfile
from tavernkit.providers.request import (
    PromptRequest,
)

__all__ = [
    "ChatCompletionService",
    "ChatRequestOptions",
    "ConnectionManagerRequestService",
    "StreamChunk",
    "TextCompletionService",
    "construct_prompt",
    "send_chat_request",
    "send_generation_request",
    "send_streaming_request",
]


class ChatRequestOptions(TypedDict, total=False):
    """:func:`send_chat_request`'s keyword options: the ``tools`` offered and ``tool_choice``,
    the presets (``llm_preset_name``, ``api_preset_name``, ``api_settings_override``), the
    ``request_scope`` (``"main"`` runs the main chat's hooks, ``"extension_internal"`` skips
    them), ``function_call_options`` and a ``json_schema`` for structured output."""

    tools: Sequence[Any] | None
    tool_choice: Any
    llm_preset_name: str
    api_preset_name: str
    api_settings_override: Mapping[str, Any] | ConnectionProfile | None
    request_scope: str
    function_call_options: Mapping[str, Any] | None
    json_schema: Mapping[str, Any] | None


async def send_chat_request(
    ctx: RequestPort,
    kind: str,
    messages: Sequence[Mapping[str, Any]],
    abort: AbortSignal | None = None,
    **options: Unpack[ChatRequestOptions],
) -> dict[str, Any]:
    """``messages`` to a chat-family connection, once; the OpenAI-shaped response body (the
    options: :class:`ChatRequestOptions`)."""
    unknown = sorted(set(options) - set(ChatRequestOptions.__annotations__))
    if unknown:
        raise TypeError(f"send_chat_request() got an unexpected keyword argument {unknown[0]!r}")
    o = options
    sender = _Sender(ctx)
    connection, request = await _chat_request(
        sender,
        messages,
        _Presets(
            llm_preset_name=o.get("llm_preset_name", ""),
            api_preset_name=o.get("api_preset_name", ""),
            api_settings_override=o.get("api_settings_override"),
        ),
        _ToolOffer(
            tools=o.get("tools"),
            tool_choice=o.get("tool_choice", "auto"),
            function_call_options=o.get("function_call_options"),
        ),
        {"json_schema": o.get("json_schema")},
    )
    scope = _scope(o.get("request_scope", "main"))
    completion = await sender.send(
        connection, request, kind=kind, scope=scope, stream=False, abort=abort
    )
    return completion_to_openai(completion)


async def send_streaming_request(
    ctx: RequestPort,
    kind: str,
    messages: Sequence[Mapping[str, Any]],
    abort: AbortSignal | None = None,
    **options: Any,
) -> AsyncIterator[StreamChunk]:
    """:func:`send_chat_request` streamed (the ``before_request`` hooks see ``stream=True``);
    raises ``aborted`` at once when ``abort`` already fired. ``data`` is request data with
    SillyTavern's keys (``max_tokens``, ``temperature``, ``stop``...) applied on top of the
    preset's samplers, as :func:`send_generation_request` takes it; ``include_preset=False``
    sends only those (no preset is read: a proxy's request stays the caller's)."""
    if abort is not None and abort.aborted:
        raise GenerateTaskError("aborted", "request aborted", details={"delivered_text": ""})
    scope = _scope(options.pop("request_scope", "main"))
    data = dict(options.pop("data", None) or {})
    json_schema = options.pop("json_schema", None)
    if json_schema is not None or "json_schema" not in data:
        data["json_schema"] = json_schema
    sender = _Sender(ctx)
    connection, request = await _chat_request(
        sender,
        messages,
        _Presets(
            llm_preset_name=options.pop("llm_preset_name", ""),
            api_preset_name=options.pop("api_preset_name", ""),
            api_settings_override=options.pop("api_settings_override", None),
            include_preset=bool(options.pop("include_preset", True)),
        ),
        _ToolOffer(
            tools=options.pop("tools", None),
            tool_choice=options.pop("tool_choice", "auto"),
            function_call_options=options.pop("function_call_options", None),
        ),
        data,
    )
    if options:
        raise GenerateTaskError(
            "invalid_input",
            f"unknown option(s): {', '.join(sorted(options))}",
            details={"field": next(iter(sorted(options)))},
        )
    async for chunk in _stream_chunks(
        sender, connection, request, kind=kind, scope=scope, abort=abort
    ):
        yield chunk


async def send_generation_request(
    ctx: RequestPort,
    kind: str,
    data: Mapping[str, Any],
    abort: AbortSignal | None = None,
    *,
    api_preset_name: str = "",
    api_settings_override: Mapping[str, Any] | ConnectionProfile | None = None,
    llm_preset_name: str = "",
    request_scope: str = "main",
    include_preset: bool = True,
) -> dict[str, Any]:
    """Route ``data`` by the connection's API family: ``messages`` to a chat backend (a bare
    ``prompt`` becomes one user message), ``prompt`` to a text backend (``messages`` are
    folded with the instruct template). Returns the OpenAI-shaped response body.
    ``include_preset=False``: a chat backend gets ``data``'s samplers alone, no preset's."""
    sender = _Sender(ctx)
    scope = _scope(request_scope)
    connection = await sender.connection(
        api_preset_name, api_settings_override, str(data.get("model") or "")
    )
    request: PromptRequest
    if connection.family == "chat":
        _, request = await _chat_request(
            sender,
            _as_messages(data),
            _Presets(
                llm_preset_name=llm_preset_name,
                api_preset_name=api_preset_name,
                api_settings_override=api_settings_override,
                include_preset=include_preset,
            ),
            _ToolOffer(
                tools=data.get("tools"),
                tool_choice=data.get("tool_choice", "auto"),
                function_call_options=None,
            ),
            data,
        )
    else:
        request = await _text_prompt(sender, data)
    completion = await sender.send(
        connection, request, kind=kind, scope=scope, stream=False, abort=abort
    )
    return completion_to_openai(completion)
