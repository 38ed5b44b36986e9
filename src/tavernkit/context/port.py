"""``RequestPort``: what SillyTavern's request API (:mod:`.request_primitives`,
:mod:`.service_classes`, :mod:`.request_data`) needs of the context it is called through.

:class:`~tavernkit.context.tavern_context.TavernContext` is the one implementation; the request
modules depend on this small port, not on the context class, so the context can import them
without a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from tavernkit.generation.attempt.sending import BeforeRequest
from tavernkit.generation.hooks import RequestScope
from tavernkit.generation.plan import Plan
from tavernkit.generation.profiles import ResolvedConnection
from tavernkit.models.preset import ChatCompletionPreset
from tavernkit.models.profile import ConnectionProfile
from tavernkit.models.state import ChatState
from tavernkit.providers.retry import RetryPolicy
from tavernkit.runtime import Runtime

__all__ = ["ProfileReader", "RequestPort"]


class ProfileReader(Protocol):
    """The stored connection profiles of the context's owner (references, never secrets)."""

    async def list(self) -> list[ConnectionProfile]: ...

    async def get(self, name: str) -> ConnectionProfile | None: ...


class RequestPort(Protocol):
    """The context as the request API sees it."""

    @property
    def chat_id(self) -> str | None: ...

    @property
    def runtime(self) -> Runtime: ...

    @property
    def retry(self) -> RetryPolicy: ...

    @property
    def connection_profiles(self) -> ProfileReader: ...

    async def chat_state(self) -> ChatState:
        """Everything a turn of this context reads, loaded now."""
        ...

    async def resolve_named(
        self,
        name: str,
        model_override: str = "",
        api_settings_override: Mapping[str, Any] | ConnectionProfile | None = None,
    ) -> ResolvedConnection:
        """The connection of the profile ``name`` (the active one for ``""``)."""
        ...

    async def plan_for(self, connection: ResolvedConnection) -> Plan:
        """The plan a generation on ``connection`` runs (key pool, fallback chain)."""
        ...

    async def preset_named(self, name: str) -> ChatCompletionPreset | None:
        """The chat-completion preset ``name``."""
        ...

    def request_hooks(self, scope: RequestScope = "extension_internal") -> BeforeRequest | None:
        """The before-request hooks of ``scope``."""
        ...
