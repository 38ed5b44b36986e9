"""Connection profiles: where and how a generation is sent.

A profile names an API family and source, a base URL, a model, and the *references* to its API
keys. The secrets themselves live in the store's key table and are never part of a profile, a
list call or an export. Capability facts can be overridden per profile (pydantic-ai's split:
the provider is where/how, the model profile is what the model can do).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tavernkit.models.base import ValueModel

__all__ = [
    "ApiFamily",
    "CapabilityOverrides",
    "ConnectionProfile",
    "CredentialRef",
    "CustomEndpoint",
    "FallbackChain",
    "FallbackEntry",
    "ProfileTimeouts",
    "ReviewSettings",
]

#: The prompt shape a profile needs: chat messages, a text prompt, or a legacy backend.
ApiFamily = Literal["chat", "text", "kobold", "novel", "local"]


class CredentialRef(ValueModel):
    """A pointer to a stored API key (by the store's key id), or to an environment variable."""

    key_id: str | None = None
    env: str | None = None
    label: str | None = None


class CapabilityOverrides(ValueModel):
    """Per-profile corrections of what the model can do; ``None`` keeps the model's known value."""

    supports_prefill: bool | None = None
    supports_tools: bool | None = None
    native_json_schema: bool | None = None
    supports_images: bool | None = None
    reasoning_format: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None


class ProfileTimeouts(ValueModel):
    """How long a request through this profile may wait, in seconds (``None``: the default).

    - ``connect``: opening the connection (default 10 s);
    - ``first_byte``: from sending the request to the first data event (default 120 s; a
      reasoning model that thinks before it streams needs more);
    - ``idle``: between two data events once the reply streams (default 60 s; keep-alive
      comments do not count).

    Any of them firing is a *timeout*: the key is not rotated or cooled (the model was slow,
    not the key bad); the turn falls back or fails, keeping what was shown.
    """

    connect: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    first_byte: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    idle: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class ReviewSettings(ValueModel):
    """Response review ("drafting", brief 003) of chat turns, set per profile or per chat.

    ``enabled`` off turns review off where the other level turns it on (a chat's setting wins
    over its profile's). The reviewer is inherited (``reviewer_profile`` unset: the author
    attempt's own model and key, whichever key or fallback answered) or pinned: a stored
    profile, optionally with another model, re-validated like any attempt; a pinned reviewer
    that cannot be used makes review *unavailable* for the turn, and the reply is delivered.
    """

    enabled: bool = True
    reviewer_profile: str | None = None
    reviewer_model: str | None = None


class ConnectionProfile(ValueModel):
    """One way to reach one model (SillyTavern's connection profile, plus several keys)."""

    name: str
    api: ApiFamily = "chat"
    source: str = "openai"
    base_url: str | None = None
    model: str | None = None
    proxy: str | None = None
    credentials: list[CredentialRef] = Field(default_factory=list)
    chat_preset: str | None = None
    instruct_template: str | None = None
    context_template: str | None = None
    sysprompt: str | None = None
    reasoning_template: str | None = None
    tokenizer: str | None = None
    capabilities: CapabilityOverrides = Field(default_factory=CapabilityOverrides)
    timeouts: ProfileTimeouts = Field(default_factory=ProfileTimeouts)
    #: the stored :class:`FallbackChain` tried, in order, when this profile fails a chat turn
    #: (the chain belongs to the primary it backs up, so switching profiles switches chains)
    fallback_chain: str | None = None
    #: response review of this profile's chat turns (``None``: off unless the chat turns it on)
    review: ReviewSettings | None = None


class FallbackEntry(ValueModel):
    """One step of a fallback chain: a model reached through one credential.

    The pair is the unit: the same model with two keys is two entries.
    """

    profile: str
    model: str | None = None
    credential: CredentialRef | None = None


class FallbackChain(ValueModel):
    """Models tried in order when the one before fails in a way that a fallback may fix."""

    name: str
    entries: list[FallbackEntry] = Field(default_factory=list)
    #: brief 003's randomizer: each turn promotes one member of the pool (the primary and
    #: these entries) to lead, the rest keep their order; seeded per turn (see
    #: :func:`tavernkit.chat.plan.chat_plan`)
    randomize: bool = False


class CustomEndpoint(ValueModel):
    """A user-defined OpenAI-compatible (or other family) endpoint that profiles can name."""

    name: str
    base_url: str
    api: ApiFamily = "chat"
    models: list[str] = Field(default_factory=list)
