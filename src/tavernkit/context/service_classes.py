"""The three service classes of the reference front end, over the primitives of
:mod:`tavernkit.context.request_primitives` (same resolution, same one-attempt send, same hooks).

- :class:`ChatCompletionService` / :class:`TextCompletionService`: ``create_request_data``,
  ``send_request``, ``process_request`` (a named preset's samplers under the data's own);
  ``TextCompletionService.construct_prompt`` folds chat messages into one instruct string.
- :class:`ConnectionManagerRequestService`: one generation through a connection profile by
  name, whatever profile is active; profile listing and lookups.

Their ``send_request`` defaults to ``request_scope="extension_internal"``: a plugin's direct
request is background work, not a chat turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tavernkit.context.port import RequestPort
from tavernkit.context.request_data import (
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
from tavernkit.errors import GenerateTaskError
from tavernkit.generation.abort import AbortSignal
from tavernkit.generation.profiles import ResolvedConnection, family_of
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.templates import InstructTemplate
from tavernkit.providers.request import PromptRequest
from tavernkit.tasks import prompt as tp

__all__ = ["ChatCompletionService", "ConnectionManagerRequestService", "TextCompletionService"]


def _extracted(body: dict[str, Any], extract_data: bool) -> dict[str, Any]:
    if not extract_data:
        return body
    message = body["choices"][0]["message"]
    return {"content": message.get("content") or "", "reasoning": message.get("reasoning_content")}


async def _answer(
    sender: _Sender,
    connection: ResolvedConnection,
    request: PromptRequest,
    data: Mapping[str, Any],
    request_scope: str,
    signal: AbortSignal | None,
    extract_data: bool,
) -> Any:
    """A service's reply to one built request: chunks as they come with ``data["stream"]``,
    else the whole OpenAI-shaped body (or its content and reasoning)."""
    scope = _scope(request_scope)
    if data.get("stream"):
        return _stream_chunks(sender, connection, request, kind="quiet", scope=scope, abort=signal)
    completion = await sender.send(
        connection, request, kind="quiet", scope=scope, stream=False, abort=signal
    )
    return _extracted(completion_to_openai(completion), extract_data)


class ChatCompletionService:
    """Chat-completion requests without the generation pipeline (the reference's class)."""

    def __init__(self, ctx: RequestPort) -> None:
        self.ctx = ctx

    def create_request_data(self, custom: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A request-data dict (``messages`` required; ``stream`` defaults to ``False``)."""
        data: dict[str, Any] = {"messages": [], "stream": False}
        data.update(custom or {})
        if not isinstance(data.get("messages"), list):
            raise GenerateTaskError(
                "invalid_input", "messages must be a list", details={"field": "messages"}
            )
        return data

    async def send_request(
        self,
        data: Mapping[str, Any],
        extract_data: bool = True,
        signal: AbortSignal | None = None,
        *,
        api_preset_name: str = "",
        llm_preset_name: str = "",
        request_scope: str = "extension_internal",
        include_preset: bool = True,
    ) -> Any:
        """``{"content", "reasoning"}`` (``extract_data``) or the OpenAI-shaped body; with
        ``data["stream"]`` an async iterator of :class:`StreamChunk` instead.
        ``include_preset=False`` sends only the data's own samplers."""
        sender = _Sender(self.ctx)
        connection, request = await _chat_request(
            sender,
            data.get("messages") or [],
            _Presets(
                llm_preset_name=llm_preset_name,
                api_preset_name=api_preset_name,
                api_settings_override=data.get("api_settings_override"),
                include_preset=include_preset,
            ),
            _ToolOffer(
                tools=data.get("tools"),
                tool_choice=data.get("tool_choice", "auto"),
                function_call_options=None,
            ),
            data,
        )
        return await _answer(sender, connection, request, data, request_scope, signal, extract_data)

    async def process_request(
        self,
        request_data: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
        extract_data: bool = True,
        signal: AbortSignal | None = None,
    ) -> Any:
        """:meth:`send_request` with ``options["preset_name"]``'s samplers under the data's
        own and ``options["api_preset_name"]``'s connection."""
        options = options or {}
        return await self.send_request(
            self.create_request_data(request_data),
            extract_data,
            signal,
            api_preset_name=str(options.get("api_preset_name") or ""),
            llm_preset_name=str(options.get("preset_name") or ""),
        )


class TextCompletionService:
    """Text-completion requests without the generation pipeline (the reference's class)."""

    def __init__(self, ctx: RequestPort) -> None:
        self.ctx = ctx

    def create_request_data(self, custom: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A request-data dict (``prompt`` required; ``stream`` defaults to ``False``)."""
        data: dict[str, Any] = {"prompt": "", "stream": False}
        data.update(custom or {})
        if not isinstance(data.get("prompt"), str):
            raise GenerateTaskError(
                "invalid_input", "prompt must be a string", details={"field": "prompt"}
            )
        return data

    async def construct_prompt(
        self,
        prompt: Sequence[Mapping[str, Any]],
        instruct_preset: InstructTemplate | str | None = None,
        instruct_settings: Mapping[str, Any] | None = None,
    ) -> str:
        """Chat messages as one instruct-formatted prompt string."""
        text, _ = await construct_prompt(self.ctx, prompt, instruct_preset, instruct_settings)
        return text

    async def send_request(
        self,
        data: Mapping[str, Any],
        extract_data: bool = True,
        signal: AbortSignal | None = None,
        *,
        api_preset_name: str = "",
        request_scope: str = "extension_internal",
    ) -> Any:
        sender = _Sender(self.ctx)
        connection = await sender.connection(
            api_preset_name, data.get("api_settings_override"), str(data.get("model") or "")
        )
        if connection.family != "text":
            raise GenerateTaskError(
                "unsupported_api",
                f"connection {connection.profile.name!r} is a chat-completion backend; use "
                "ChatCompletionService",
                details={"api": connection.api},
            )
        request = await _text_prompt(sender, data)
        return await _answer(sender, connection, request, data, request_scope, signal, extract_data)

    async def process_request(
        self,
        request_data: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
        extract_data: bool = True,
        signal: AbortSignal | None = None,
    ) -> Any:
        options = options or {}
        data = self.create_request_data(request_data)
        return await self.send_request(
            data, extract_data, signal, api_preset_name=str(options.get("api_preset_name") or "")
        )


_ICONS = {"chat": "fa-solid fa-comments", "text": "fa-solid fa-align-left"}


class ConnectionManagerRequestService:
    """Send through a connection profile by name, whatever profile is active."""

    def __init__(self, ctx: RequestPort) -> None:
        self.ctx = ctx

    def get_allowed_types(self) -> dict[str, str]:
        return {"openai": "Chat Completion", "textgenerationwebui": "Text Completion"}

    async def get_supported_profiles(self) -> list[ConnectionProfile]:
        return await self.ctx.connection_profiles.list()

    async def get_profile(self, profile_id: str) -> ConnectionProfile | None:
        return await self.ctx.connection_profiles.get(profile_id)

    async def get_profile_icon(self, profile_id: str | None = None) -> str:
        profile = await self.get_profile(profile_id) if profile_id else None
        if profile_id and profile is None:
            return ""
        if profile is None:
            return _ICONS[(await self.ctx.resolve_named("")).family]
        return _ICONS[family_of(profile)]

    async def _require(self, profile_id: str) -> ConnectionProfile:
        profile = await self.get_profile(profile_id)
        if profile is None:
            raise GenerateTaskError(
                "invalid_input",
                f"no connection profile named {profile_id!r}",
                details={"field": "profile_id", "value": profile_id},
            )
        return profile

    async def construct_prompt(
        self,
        prompt: str | Sequence[Mapping[str, Any]],
        profile_id: str,
        instruct_settings: Mapping[str, Any] | None = None,
    ) -> str | list[dict[str, Any]]:
        """What :meth:`send_request` would send: messages for a chat profile (a string
        becomes one user message), one instruct string for a text profile."""
        profile = await self._require(profile_id)
        messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        if family_of(profile) == "chat":
            return [dict(m) for m in tp.validate_task_messages(messages)]
        if isinstance(prompt, str):
            return prompt
        text, _ = await construct_prompt(self.ctx, messages, None, instruct_settings)
        return text

    async def send_request(
        self,
        profile_id: str,
        prompt: str | Sequence[Mapping[str, Any]],
        max_tokens: int,
        custom: Mapping[str, Any] | None = None,
        override_payload: Mapping[str, Any] | None = None,
    ) -> Any:
        """One generation through ``profile_id``. ``custom``: ``stream``, ``signal``,
        ``extract_data`` (default true), ``include_preset`` (the selected preset's samplers
        under ``override_payload``; default true), ``include_instruct`` (fold messages with
        the instruct template for a text profile; default true), ``instruct_settings``.
        ``override_payload`` keys win over everything (samplers, ``stop``, ``model``...)."""
        await self._require(profile_id)
        custom = dict(custom or {})
        data: dict[str, Any] = {"max_tokens": max_tokens, **(override_payload or {})}
        data["stream"] = bool(custom.get("stream"))
        connection = await self.ctx.resolve_named(profile_id, str(data.get("model") or ""))
        if isinstance(prompt, str):
            data["prompt" if connection.family == "text" else "messages"] = (
                prompt if connection.family == "text" else [{"role": "user", "content": prompt}]
            )
        elif connection.family == "text":
            if custom.get("include_instruct", True):
                data["prompt"] = await self.construct_prompt(
                    prompt, profile_id, custom.get("instruct_settings")
                )
            else:
                data["prompt"] = "\n".join(str(m.get("content") or "") for m in prompt)
        else:
            data["messages"] = list(prompt)
        service: ChatCompletionService | TextCompletionService
        kwargs: dict[str, Any] = {"api_preset_name": profile_id}
        if connection.family == "text":
            service = TextCompletionService(self.ctx)
        else:
            service = ChatCompletionService(self.ctx)
            kwargs["include_preset"] = bool(custom.get("include_preset", True))
        return await service.send_request(
            data, bool(custom.get("extract_data", True)), custom.get("signal"), **kwargs
        )
