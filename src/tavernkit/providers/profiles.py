"""What a model can do, kept apart from how to reach it.

A :class:`ModelProfile` is capability data (prefill, tools, native JSON schema, vision,
reasoning format and signature round-trip, context window, output ceiling, status). Prefill
is per model, not per provider: Claude 4.6 and later reject a trailing assistant message that
older Claude models accept.

The catalogue is deliberately small (the models the project tests against and the common
defaults); unknown models of a known family get the family's generic profile unless the
caller asks for strict resolution. Resolving a deprecated or unavailable model, or asking for
a capability the model lacks, raises :class:`~tavernkit.errors.ModelUnavailable` naming the
model and provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tavernkit.errors import ModelUnavailable

#: the embedded model's name (the one written into profiles, the model table and requests)
LOCAL_MODEL_NAME = "smollm2-135m-instruct"

__all__ = [
    "CATALOGUE",
    "FAMILY_DEFAULTS",
    "LOCAL_MODEL_NAME",
    "ModelProfile",
    "ModelStatus",
    "ReasoningFormat",
    "resolve_model",
]

ModelStatus = Literal["available", "deprecated", "unavailable"]
#: where reasoning arrives: a field of the response, Anthropic thinking blocks, Gemini
#: thought parts, ``<think>``-style tags inside the text, or not at all
ReasoningFormat = Literal[
    "none", "reasoning_content", "reasoning_details", "anthropic", "gemini", "tags"
]


@dataclass(frozen=True, slots=True)
class ModelProfile:
    model: str
    family: str
    codename: str = ""
    status: ModelStatus = "available"
    context_window: int = 8192
    max_output_tokens: int = 4096
    supports_prefill: bool = True
    supports_tools: bool = False
    supports_vision: bool = False
    native_json_schema: bool = False
    reasoning_format: ReasoningFormat = "none"
    signature_roundtrip: bool = False
    #: sampler fields the API accepts (others are not sent)
    sampler_names: frozenset[str] = frozenset({"temperature", "top_p", "max_tokens", "stop"})
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def require(self, capability: str, *, provider: str | None = None) -> None:
        """Raise :class:`ModelUnavailable` unless ``capability`` (a bool field) is on."""
        if not getattr(self, capability, False):
            raise ModelUnavailable(
                f"model does not support {capability.removeprefix('supports_')}",
                provider=provider,
                model=self.model,
            )


_OPENAI_SAMPLERS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "n",
        "logit_bias",
    }
)
_TEXT_SAMPLERS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "top_a",
        "min_p",
        "typical_p",
        "tfs",
        "repetition_penalty",
        "max_tokens",
        "stop",
        "seed",
        "mirostat",
        "dry",
        "xtc",
    }
)

#: the generic profile of each adapter family, used for models not in the catalogue
FAMILY_DEFAULTS: dict[str, ModelProfile] = {
    "openai": ModelProfile(
        "*",
        "openai",
        context_window=128_000,
        max_output_tokens=16_384,
        supports_tools=True,
        supports_vision=True,
        native_json_schema=True,
        sampler_names=_OPENAI_SAMPLERS,
    ),
    "openai-compatible": ModelProfile(
        "*",
        "openai-compatible",
        context_window=8192,
        supports_tools=True,
        reasoning_format="reasoning_content",
        sampler_names=_OPENAI_SAMPLERS | _TEXT_SAMPLERS,
    ),
    "anthropic": ModelProfile(
        "*",
        "anthropic",
        context_window=200_000,
        max_output_tokens=8192,
        supports_tools=True,
        supports_vision=True,
        reasoning_format="anthropic",
        signature_roundtrip=True,
        sampler_names=frozenset({"temperature", "top_p", "top_k", "max_tokens", "stop"}),
    ),
    "gemini": ModelProfile(
        "*",
        "gemini",
        context_window=1_048_576,
        max_output_tokens=65_536,
        supports_tools=True,
        supports_vision=True,
        native_json_schema=True,
        reasoning_format="gemini",
        signature_roundtrip=True,
        sampler_names=frozenset({"temperature", "top_p", "top_k", "max_tokens", "stop", "seed"}),
    ),
    "text": ModelProfile(
        "*",
        "text",
        context_window=4096,
        native_json_schema=True,
        reasoning_format="tags",
        sampler_names=_TEXT_SAMPLERS,
    ),
    # the embedded llama.cpp model (providers/local_llama.py): grammar-constrained JSON, and
    # reasoning, if any, written inline as tags
    "local": ModelProfile(
        "*",
        "local",
        context_window=4096,
        max_output_tokens=2048,
        native_json_schema=True,
        reasoning_format="tags",
        sampler_names=_TEXT_SAMPLERS,
    ),
    "novelai": ModelProfile(
        "*",
        "novelai",
        context_window=8192,
        max_output_tokens=150,
        sampler_names=_TEXT_SAMPLERS,
    ),
}


def _m(family: str, model: str, **kw: Any) -> ModelProfile:
    return replace(FAMILY_DEFAULTS[family], model=model, **kw)


#: (family, model) -> profile
CATALOGUE: dict[tuple[str, str], ModelProfile] = {
    (p.family, p.model): p
    for p in (
        _m("openai", "gpt-4o", codename="4o"),
        _m("openai", "gpt-4o-mini", codename="4o-mini"),
        _m("openai", "gpt-4.1", codename="4.1", context_window=1_047_576, max_output_tokens=32_768),
        _m(
            "openai",
            "o3",
            codename="o3",
            context_window=200_000,
            max_output_tokens=100_000,
            supports_prefill=False,
            extra={"max_tokens_field": "max_completion_tokens"},
        ),
        _m(
            "openai",
            "gpt-3.5-turbo",
            codename="3.5",
            status="deprecated",
            context_window=16_385,
            supports_vision=False,
        ),
        _m("anthropic", "claude-sonnet-4-5", codename="sonnet-4.5", max_output_tokens=64_000),
        _m(
            "anthropic",
            "claude-opus-4-6",
            codename="opus-4.6",
            max_output_tokens=32_000,
            supports_prefill=False,
            notes="rejects assistant prefill",
        ),
        _m(
            "anthropic",
            "claude-sonnet-4-6",
            codename="sonnet-4.6",
            max_output_tokens=64_000,
            supports_prefill=False,
            notes="rejects assistant prefill",
        ),
        _m(
            "anthropic",
            "claude-3-opus-20240229",
            codename="opus-3",
            status="unavailable",
            max_output_tokens=4096,
        ),
        _m("gemini", "gemini-2.5-pro", codename="2.5-pro"),
        _m("gemini", "gemini-2.5-flash", codename="2.5-flash"),
        _m("gemini", "gemini-3-pro-preview", codename="3-pro"),
        _m("openai-compatible", "deepseek-chat", codename="ds-chat", context_window=128_000),
        _m(
            "openai-compatible",
            "deepseek-reasoner",
            codename="ds-r1",
            context_window=128_000,
            supports_tools=False,
        ),
        _m(
            "text",
            LOCAL_MODEL_NAME,
            codename="smollm2",
            context_window=8192,
            max_output_tokens=2048,
        ),
        _m(
            "local",
            LOCAL_MODEL_NAME,
            codename="smollm2",
            context_window=8192,
            max_output_tokens=2048,
            notes="SmolLM2-135M-Instruct Q4_1, in-process through xllamacpp (llama.cpp)",
        ),
    )
}


def resolve_model(
    family: str,
    model: str,
    *,
    provider: str | None = None,
    strict: bool = False,
    allow_deprecated: bool = False,
) -> ModelProfile:
    """The profile of ``model`` in ``family``.

    Unknown models get the family default (``strict=False``) or raise; deprecated models raise
    unless ``allow_deprecated``; unavailable models always raise.
    """
    profile = CATALOGUE.get((family, model))
    if profile is None:
        if strict or family not in FAMILY_DEFAULTS:
            raise ModelUnavailable("unknown model", provider=provider or family, model=model)
        return replace(FAMILY_DEFAULTS[family], model=model)
    if profile.status == "unavailable":
        raise ModelUnavailable(
            "model is no longer available", provider=provider or family, model=model
        )
    if profile.status == "deprecated" and not allow_deprecated:
        raise ModelUnavailable("model is deprecated", provider=provider or family, model=model)
    return profile
