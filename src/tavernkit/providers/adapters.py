"""The request body SillyTavern 1.18 would send for a recorded generation, built by our
adapters from a prompt and SillyTavern's live sampler settings.

A prompt case (the conformance folder's ``prompts/*.json``) records ``effective_settings`` —
``oai_settings`` for chat completion, the text-generation settings for text completion,
``kai_settings`` for KoboldAI classic — and the body the backend received. This module maps
those settings onto :class:`~tavernkit.providers.request.Sampling` and lays out the body with
the adapter of that wire API. The prompt part comes in ready made (the prompt engine's job), so
this module stays below ``prompt/`` in the house.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tavernkit.errors import FormatError
from tavernkit.providers.base import Adapter, WireRequest
from tavernkit.providers.kobold import KoboldAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.request import ChatPrompt, PromptRequest, Sampling, TextPrompt
from tavernkit.providers.st_samplers import (
    sampling_from_kai_settings,
    sampling_from_oai_settings,
    sampling_from_textgen_settings,
)

__all__ = ["build_request_body", "st_request", "st_sampling"]


def _section(settings: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = settings.get(key)
    if not isinstance(value, Mapping):
        raise FormatError(
            f"effective_settings has no {key!r} object", source="prompt case", field=key
        )
    return value


def _int(settings: Mapping[str, Any], key: str) -> int:
    value = settings.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(
            f"effective_settings.{key} must be an integer", source="prompt case", field=key
        )
    return value


def st_sampling(api: str, settings: Mapping[str, Any]) -> Sampling:
    """The samplers SillyTavern had live for ``api`` (``cc``, ``tc`` or ``kobold``)."""
    if api == "cc":
        return sampling_from_oai_settings(_section(settings, "oai_settings"))
    if api == "tc":
        return sampling_from_textgen_settings(
            _section(settings, "textgen_settings"),
            max_tokens=_int(settings, "amount_gen"),
            context_size=_int(settings, "max_context"),
        )
    if api == "kobold":
        power = settings.get("power_user")
        single_line = bool(power.get("single_line")) if isinstance(power, Mapping) else False
        return sampling_from_kai_settings(
            _section(settings, "kai_settings"),
            max_tokens=_int(settings, "amount_gen"),
            context_size=_int(settings, "max_context"),
            single_line=single_line,
        )
    raise FormatError(f"unknown API kind {api!r}", source="prompt case", field="api")


def st_request(api: str, settings: Mapping[str, Any], prompt: PromptRequest) -> WireRequest:
    """The wire request for ``prompt`` with SillyTavern's live settings for ``api``.

    Chat completion goes to ``/v1/chat/completions`` with the custom source's model and stream
    switch; text completion to ``/v1/completions`` (text-generation-webui dialect, as SillyTavern
    sends for KoboldCpp); KoboldAI classic to ``/api/v1/generate``, whose prompt carries no
    stop sequences of its own.
    """
    sampling = st_sampling(api, settings)
    adapter: Adapter
    if api == "cc":
        if not isinstance(prompt, ChatPrompt):
            raise FormatError("a chat-completion case needs a message list", source="prompt")
        oai = _section(settings, "oai_settings")
        adapter = OpenAIChatAdapter()
        request: PromptRequest = dataclasses.replace(prompt, sampling=sampling)
        return adapter.build_request(
            request, model=str(oai.get("custom_model") or ""), stream=bool(oai.get("stream_openai"))
        )
    if not isinstance(prompt, TextPrompt):
        raise FormatError("a text-completion case needs a prompt string", source="prompt")
    if api == "tc":
        textgen = _section(settings, "textgen_settings")
        adapter = OpenAITextAdapter(dialect="textgen")
        request = dataclasses.replace(prompt, sampling=sampling)
        return adapter.build_request(request, model=None, stream=bool(textgen.get("streaming")))
    kai = _section(settings, "kai_settings")
    adapter = KoboldAdapter(stop_sequence=False)
    request = TextPrompt(prompt.prompt, sampling=sampling)
    return adapter.build_request(request, model=None, stream=bool(kai.get("streaming_kobold")))


def build_request_body(case: Mapping[str, Any], prompt: PromptRequest) -> dict[str, Any]:
    """The JSON body of one prompt case (``request_body``), from ``prompt`` (built by the
    prompt engine from the case's inputs) and the case's ``effective_settings``."""
    settings = case.get("effective_settings")
    if not isinstance(settings, Mapping):
        raise FormatError(
            "the case has no effective_settings", source="prompt case", field="effective_settings"
        )
    return st_request(str(case.get("api")), settings, prompt).body
