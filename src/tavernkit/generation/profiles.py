"""Connection profile + preset resolution: the profile says *where* to send, the preset *how*.

A connection profile (API family, source, base URL, model, credential references, capability
overrides) resolves to a :class:`ResolvedConnection`: a provider ready to send, the model's
capability profile, and the tool facts the capability table reads. A chat-completion preset
contributes only generation parameters (:func:`sampling_from_preset`); its connection fields
(``chat_completion_source``, ``openai_model``...) are ignored, so any preset combines with any
profile. Layers apply in this order, later winning: the active profile (or the embedded model
when none is configured), the profile named by ``api_preset_name``, an explicit
``api_settings_override``, then ``model_override``.

The embedded model (SmolLM2 through llama.cpp, in-process) is the default profile, so a fresh
install with no configuration and no network can still run ``generate_task``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx2
from pydantic import ValidationError

from tavernkit.errors import GenerateTaskError, ModelUnavailable
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile, ProfileTimeouts
from tavernkit.models.samplers import TextGenSettings
from tavernkit.providers.accumulator import Completion
from tavernkit.providers.anthropic import AnthropicAdapter
from tavernkit.providers.base import Adapter
from tavernkit.providers.gemini import GeminiAdapter
from tavernkit.providers.http import AbortLike, Timeouts
from tavernkit.providers.kobold import KoboldAdapter
from tavernkit.providers.llamacpp import LlamaCppAdapter
from tavernkit.providers.local_llama import LocalLlamaProvider
from tavernkit.providers.novelai import NovelAIAdapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.openai_text import OpenAITextAdapter
from tavernkit.providers.profiles import LOCAL_MODEL_NAME, ModelProfile, resolve_model
from tavernkit.providers.provider import AuthScheme, Provider
from tavernkit.providers.request import PromptRequest, Sampling
from tavernkit.providers.retry import RetryPolicy
from tavernkit.providers.sources import ProviderSource
from tavernkit.providers.st_samplers import sampling_from_textgen_settings
from tavernkit.tools.capability import ToolCapabilities

__all__ = [
    "BUILTIN_SOURCES",
    "EMBEDDED_PROFILE",
    "ChatFamily",
    "LocalFactory",
    "ProviderLike",
    "ResolvedConnection",
    "SecretLoader",
    "apply_settings_override",
    "default_base_url",
    "family_of",
    "local_provider",
    "model_family",
    "resolve_connection",
    "sampling_from_preset",
    "sampling_from_textgen",
]

#: ``chat`` sends messages; ``text`` sends one folded prompt string.
ChatFamily = str

#: The profile used when none is configured: the embedded offline model.
EMBEDDED_PROFILE = ConnectionProfile(
    name="embedded", api="local", source="local", model=LOCAL_MODEL_NAME
)

#: source -> (default base URL, auth scheme, key required)
_SOURCES: dict[str, tuple[str, AuthScheme, bool]] = {
    "openai": ("https://api.openai.com/v1", "bearer", True),
    "claude": ("https://api.anthropic.com", "x-api-key", True),
    "anthropic": ("https://api.anthropic.com", "x-api-key", True),
    "makersuite": ("https://generativelanguage.googleapis.com/v1beta", "x-goog-api-key", True),
    "google": ("https://generativelanguage.googleapis.com/v1beta", "x-goog-api-key", True),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta", "x-goog-api-key", True),
    "openrouter": ("https://openrouter.ai/api/v1", "bearer", True),
    "deepseek": ("https://api.deepseek.com", "bearer", True),
    "mistralai": ("https://api.mistral.ai/v1", "bearer", True),
    "groq": ("https://api.groq.com/openai/v1", "bearer", True),
    "xai": ("https://api.x.ai/v1", "bearer", True),
    "novel": ("https://text.novelai.net", "bearer", True),
}
_ANTHROPIC = frozenset({"claude", "anthropic"})
_GEMINI = frozenset({"makersuite", "google", "gemini", "vertexai"})
#: source names a plugin's ``register_providers`` may not take (see ``ProviderSources``)
BUILTIN_SOURCES = (
    frozenset(_SOURCES)
    | _ANTHROPIC
    | _GEMINI
    | {
        "local",
        "custom",
        "llamacpp",
        "llama.cpp",
        "vllm",
        "openai-compatible",
        "textgenerationwebui",
        "kobold",
        "koboldcpp",
    }
)

#: the fields ``api_settings_override`` may set (a profile's own, plus SillyTavern's names)
_OVERRIDE_ALIASES = {
    "chat_completion_source": "source",
    "custom_url": "base_url",
    "reverse_proxy": "proxy",
    "api_url": "base_url",
}


class ProviderLike(Protocol):
    """What a resolved connection sends through: :class:`Provider` or the embedded model."""

    name: str

    def stream(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = True,
        abort: AbortLike | None = None,
    ) -> Any: ...

    async def complete(
        self,
        request: PromptRequest,
        *,
        model: str | None = None,
        profile: ModelProfile | None = None,
        stream: bool = False,
        abort: AbortLike | None = None,
        retry: RetryPolicy | None = None,
    ) -> Completion: ...


#: Loads a stored key's secret by its id (the store's ``get_api_key_secret``).
SecretLoader = Callable[[str], Awaitable[str]]
#: Builds the embedded provider (injected so tests and servers can share one loaded model).
LocalFactory = Callable[[ConnectionProfile, ModelProfile], ProviderLike]


@dataclass(frozen=True)
class ResolvedConnection:
    """A profile made ready to send: the provider, the model and what it can do."""

    profile: ConnectionProfile
    provider: ProviderLike
    model: str | None
    model_profile: ModelProfile
    capabilities: ToolCapabilities

    @property
    def family(self) -> ChatFamily:
        """``chat`` (messages) or ``text`` (one prompt string)."""
        return family_of(self.profile)

    @property
    def api(self) -> str:
        return self.profile.api

    @property
    def source(self) -> str:
        return self.profile.source

    @property
    def native_json_schema(self) -> bool:
        return self.model_profile.native_json_schema

    def can_stream(self, request: PromptRequest) -> bool:
        """Whether the backend streams this request (an adapter that cannot answers a
        streaming request with a non-streaming one)."""
        adapter = getattr(self.provider, "adapter", None)
        if not isinstance(adapter, Adapter):
            return True
        try:
            wire = adapter.build_request(
                request, model=self.model, stream=True, profile=self.model_profile
            )
        except Exception:
            return True  # the send itself will report the real problem
        return wire.stream


def family_of(profile: ConnectionProfile) -> ChatFamily:
    """The prompt shape of a profile: ``text`` for the text-completion backends."""
    return "text" if profile.api in ("text", "kobold", "novel") else "chat"


def model_family(profile: ConnectionProfile) -> str:
    """The capability family of :func:`~tavernkit.providers.profiles.resolve_model`."""
    source = profile.source.lower()
    if profile.api == "local":
        return "local"
    if profile.api in ("text", "kobold"):
        return "text"
    if profile.api == "novel":
        return "novelai"
    if source in _ANTHROPIC:
        return "anthropic"
    if source in _GEMINI:
        return "gemini"
    if source == "openai":
        return "openai"
    return "openai-compatible"


def default_base_url(profile: ConnectionProfile) -> str | None:
    known = _SOURCES.get(profile.source.lower())
    return known[0] if known else None


def _adapter(profile: ConnectionProfile) -> Adapter:
    source = profile.source.lower()
    if profile.api == "kobold":
        return KoboldAdapter()
    if profile.api == "novel":
        return NovelAIAdapter()
    if profile.api == "text":
        if source in ("llamacpp", "llama.cpp"):
            return LlamaCppAdapter()
        if source in ("openai", "vllm", "openai-compatible"):
            return OpenAITextAdapter(dialect="openai")
        return OpenAITextAdapter(dialect="textgen")
    if source in _ANTHROPIC:
        return AnthropicAdapter()
    if source in _GEMINI:
        return GeminiAdapter()
    return OpenAIChatAdapter(stream_usage=source == "openai")


def apply_settings_override(
    profile: ConnectionProfile, override: Mapping[str, Any] | ConnectionProfile | None
) -> ConnectionProfile:
    """``profile`` with the fields of ``override`` (a profile, or a mapping of profile fields
    or SillyTavern's names such as ``chat_completion_source`` / ``custom_url``) on top."""
    if override is None:
        return profile
    if isinstance(override, ConnectionProfile):
        return override
    if not isinstance(override, Mapping):
        raise GenerateTaskError(
            "invalid_input",
            "api_settings_override must be an object",
            details={"field": "api_settings_override"},
        )
    data = profile.model_dump()
    known = set(ConnectionProfile.model_fields)
    for key, value in override.items():
        name = _OVERRIDE_ALIASES.get(key, key)
        if name.endswith("_model") and name != "model" and isinstance(value, str) and value:
            name = "model"  # SillyTavern's per-source model fields (openai_model, claude_model)
        if name not in known:
            raise GenerateTaskError(
                "invalid_input",
                f"api_settings_override: unknown field {key!r}",
                details={"field": f"api_settings_override.{key}"},
            )
        data[name] = value
    try:
        return ConnectionProfile.model_validate(data)
    except ValidationError as exc:
        raise GenerateTaskError(
            "invalid_input",
            f"api_settings_override is not a valid profile: {exc.errors()[0]['msg']}",
            cause=exc,
            details={"field": "api_settings_override"},
        ) from exc


def _model_profile(
    profile: ConnectionProfile, model: str | None, plugin: ProviderSource | None = None
) -> ModelProfile:
    family = plugin.family if plugin is not None else model_family(profile)
    try:
        base = resolve_model(family, model or "*", provider=profile.source)
    except ModelUnavailable as exc:
        raise GenerateTaskError(
            "unsupported_api", str(exc), cause=exc, details={"model": model}
        ) from exc
    caps = profile.capabilities
    changes: dict[str, Any] = {}
    for ours, theirs in (
        ("supports_prefill", "supports_prefill"),
        ("supports_tools", "supports_tools"),
        ("native_json_schema", "native_json_schema"),
        ("supports_images", "supports_vision"),
        ("reasoning_format", "reasoning_format"),
        ("context_window", "context_window"),
        ("max_output_tokens", "max_output_tokens"),
    ):
        value = getattr(caps, ours)
        if value is not None:
            changes[theirs] = value
    return replace(base, **changes) if changes else base


async def _secret(
    profile: ConnectionProfile, load_secret: SecretLoader | None, environ: Mapping[str, str]
) -> str | None:
    for ref in profile.credentials:
        if ref.key_id and load_secret is not None:
            return await load_secret(ref.key_id)
        if ref.env and environ.get(ref.env):
            return environ[ref.env]
    return None


def profile_timeouts(settings: ProfileTimeouts) -> Timeouts:
    """A profile's timeouts over the defaults (a field left ``None`` keeps its default)."""
    base = Timeouts()
    return Timeouts(
        connect=settings.connect or base.connect,
        first_byte=settings.first_byte or base.first_byte,
        idle=settings.idle or base.idle,
        write=base.write,
    )


def local_provider(profile: ConnectionProfile, model_profile: ModelProfile) -> ProviderLike:
    """A new embedded model for ``profile`` (loaded on its first request). A process should
    hold one per model: ``Runtime.local_models`` holds the shared ones."""
    return LocalLlamaProvider(model=profile.model or LOCAL_MODEL_NAME, profile=model_profile)


async def resolve_connection(
    profile: ConnectionProfile | None,
    *,
    model_override: str = "",
    api_settings_override: Mapping[str, Any] | ConnectionProfile | None = None,
    load_secret: SecretLoader | None = None,
    client: httpx2.AsyncClient | None = None,
    local_factory: LocalFactory | None = None,
    environ: Mapping[str, str] | None = None,
    tools_enabled: bool = True,
    sources: Mapping[str, ProviderSource] | None = None,
) -> ResolvedConnection:
    """The provider, model and capabilities for ``profile`` (the embedded model when
    ``None``), with ``api_settings_override`` and ``model_override`` applied. ``sources``
    are the plugins' provider sources (``Runtime.provider_sources``): a chat-API profile whose
    ``source`` names one sends with its base URL, auth, adapter and capability family.

    A hosted source without a key is not an error here: the provider raises
    ``MissingCredential`` (``auth_missing``) when asked to send, so listing and previews work
    without secrets.
    """
    resolved = apply_settings_override(profile or EMBEDDED_PROFILE, api_settings_override)
    if model_override.strip():
        resolved = resolved.model_copy(update={"model": model_override.strip()})
    model = resolved.model
    plugin = (sources or {}).get(resolved.source.lower()) if resolved.api == "chat" else None
    model_profile = _model_profile(resolved, model, plugin)
    caps = ToolCapabilities(
        supports_tools=model_profile.supports_tools,
        api_family="chat" if family_of(resolved) == "chat" else "text",
        force_plain_text=False,
        enabled=tools_enabled,
    )
    if resolved.api == "local":
        provider = (local_factory or local_provider)(resolved, model_profile)
        return ResolvedConnection(resolved, provider, model, model_profile, caps)
    if plugin is not None:
        return await _plugin_connection(
            resolved, plugin, model_profile, caps, load_secret, client, environ
        )
    base_url = resolved.base_url or default_base_url(resolved)
    if not base_url:
        raise GenerateTaskError(
            "invalid_input",
            f"connection profile {resolved.name!r} has no base URL for source {resolved.source!r}",
            details={"field": "base_url", "profile": resolved.name},
        )
    known = _SOURCES.get(resolved.source.lower())
    auth: AuthScheme = known[1] if known else "bearer"
    key_required = bool(known and known[2]) and not resolved.base_url
    secret = await _secret(resolved, load_secret, os.environ if environ is None else environ)
    provider = Provider(
        name=resolved.source,
        base_url=base_url,
        adapter=_adapter(resolved),
        model=model,
        auth=auth,
        keys=secret,
        key_required=key_required,
        client=client,
        timeouts=profile_timeouts(resolved.timeouts),
        profile=model_profile,
    )
    return ResolvedConnection(resolved, provider, model, model_profile, caps)


async def _plugin_connection(
    resolved: ConnectionProfile,
    plugin: ProviderSource,
    model_profile: ModelProfile,
    caps: ToolCapabilities,
    load_secret: SecretLoader | None,
    client: httpx2.AsyncClient | None,
    environ: Mapping[str, str] | None,
) -> ResolvedConnection:
    base_url = resolved.base_url or plugin.base_url
    if not base_url:
        raise GenerateTaskError(
            "invalid_input",
            f"connection profile {resolved.name!r} has no base URL and provider source "
            f"{plugin.name!r} has no default",
            details={"field": "base_url", "profile": resolved.name},
        )
    secret = await _secret(resolved, load_secret, os.environ if environ is None else environ)
    provider = Provider(
        name=plugin.name,
        base_url=base_url,
        adapter=plugin.adapter(),
        model=resolved.model,
        auth=plugin.auth,
        keys=secret,
        key_required=plugin.key_required and not resolved.base_url,
        client=client,
        timeouts=profile_timeouts(resolved.timeouts),
        profile=model_profile,
    )
    return ResolvedConnection(resolved, provider, resolved.model, model_profile, caps)


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def sampling_from_preset(
    preset: ChatCompletionPreset | None, *, max_tokens: int | None = None
) -> Sampling:
    """A chat-completion preset's generation parameters (never its connection fields).
    SillyTavern's "off" values (``top_k`` 0, ``min_p`` 0, ``repetition_penalty`` 1, ``seed``
    -1) are not sent."""
    if preset is None:
        return Sampling(max_tokens=max_tokens)

    def unless(value: Any, off: float) -> Any:
        number = _number(value)
        return None if number is None or number == off else number

    seed = _number(preset.seed)
    return Sampling(
        max_tokens=max_tokens if max_tokens is not None else preset.openai_max_tokens,
        temperature=_number(preset.temperature),
        top_p=_number(preset.top_p),
        top_k=unless(preset.top_k, 0),
        top_a=unless(preset.top_a, 0),
        min_p=unless(preset.min_p, 0),
        repetition_penalty=unless(preset.repetition_penalty, 1),
        presence_penalty=unless(preset.presence_penalty, 0),
        frequency_penalty=unless(preset.frequency_penalty, 0),
        seed=int(seed) if seed is not None and seed >= 0 else None,
        context_size=preset.openai_max_context,
    )


def sampling_from_textgen(
    preset: TextGenSettings | None, *, max_tokens: int, context_size: int
) -> Sampling:
    """A text-completion sampler preset's parameters (SillyTavern's textgen settings)."""
    if preset is None:
        return Sampling(max_tokens=max_tokens, context_size=context_size)
    return sampling_from_textgen_settings(
        preset.to_wire(), max_tokens=max_tokens, context_size=context_size
    )
