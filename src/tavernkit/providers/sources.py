"""Provider sources plugins add: a connection profile's ``source`` name mapped to a hosted API.

The built-in sources (``openai``, ``claude``, ``makersuite``...) are a table in
:mod:`tavernkit.generation.profiles`; a plugin's ``register_providers(register)`` hook adds
:class:`ProviderSource` entries to a Tavern's :class:`ProviderSources`, and a profile whose
``source`` names one sends through it: its default base URL, auth scheme, wire adapter and
capability family. A plugin cannot replace a built-in source (a typo there would silently
send someone's OpenAI key to another host), nor claim one name twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from tavernkit.errors import PluginError
from tavernkit.providers.base import Adapter
from tavernkit.providers.openai_chat import OpenAIChatAdapter
from tavernkit.providers.provider import AuthScheme

__all__ = ["ProviderSource", "ProviderSources"]

_NAME = re.compile(r"[a-z][a-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class ProviderSource:
    """One hosted API: ``name`` is what a profile's ``source`` says (lower case).

    ``base_url`` is used when the profile has none; ``key_required`` makes a send without a
    key fail with ``auth_missing`` before anything leaves the machine (as for the built-in
    hosted sources, only when the profile does not set its own base URL); ``adapter`` makes a
    new wire adapter per connection; ``family`` is the capability family the model table is
    read with (``openai-compatible``, ``openai``, ``anthropic``, ``gemini``...).
    """

    name: str
    base_url: str | None = None
    auth: AuthScheme = "bearer"
    key_required: bool = False
    adapter: Callable[[], Adapter] = OpenAIChatAdapter
    family: str = "openai-compatible"


class ProviderSources(Mapping[str, ProviderSource]):
    """The plugin sources of one Tavern, by name; ``reserved`` are the built-in names."""

    def __init__(self, reserved: frozenset[str] = frozenset()) -> None:
        self._reserved = reserved
        self._sources: dict[str, ProviderSource] = {}

    def register(self, source: ProviderSource) -> None:
        """Add ``source``; a bad, built-in or already registered name is a ``PluginError``."""
        if not isinstance(source, ProviderSource):
            raise PluginError(
                f"register_providers expects a ProviderSource, got {type(source).__name__}"
            )
        name = source.name
        if not callable(source.adapter):
            raise PluginError(f"provider source {name!r}: adapter must make an Adapter")
        if not _NAME.fullmatch(name):
            raise PluginError(
                f"provider source name {name!r} is invalid: lower-case letters, digits, '_.-'"
            )
        if name in self._reserved:
            raise PluginError(f"provider source {name!r} is built in and cannot be replaced")
        if name in self._sources:
            raise PluginError(f"provider source {name!r} is registered twice")
        self._sources[name] = source

    def __getitem__(self, name: str) -> ProviderSource:
        return self._sources[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)
