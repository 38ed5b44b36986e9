"""The format registry: what ``tavernkit import`` can detect and read, and what it can write.

Every format, built-in or third-party, arrives through the ``register_formats`` hook, so the
CLI and the store never import a reader by name; a plugin's format is as first-class as ours.
Detection order is deterministic: higher ``priority`` first, then registration order (built-ins
register first). Priorities matter because containers overlap: a PNG card must be recognized
before any generic image reader, a CHARX zip before a generic zip, a V3 card before a plain
JSON object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pluggy

from tavernkit.errors import FormatError, PluginError, TavernKitError
from tavernkit.plugins.json_syntax import json_syntax_error

__all__ = ["Detector", "FormatHandler", "FormatRegistry", "Reader", "RegisterFormat", "Writer"]

Detector = Callable[[bytes], bool]
Reader = Callable[[bytes, str], object]
Writer = Callable[..., bytes]


class RegisterFormat(Protocol):
    """The ``register`` callable a ``register_formats`` implementation receives."""

    def __call__(
        self,
        name: str,
        detect: Detector,
        read: Reader,
        write: Writer | None = None,
        *,
        kind: str = "other",
        priority: int = 0,
    ) -> None: ...


@dataclass(frozen=True)
class FormatHandler:
    """One registered format.

    ``kind`` says what ``read`` returns ("card", "lorebook", "preset", "template", "chat", ...)
    so the importer can route the value to the right store table without inspecting it.
    ``plugin`` is the registering plugin's name, for error messages.
    """

    name: str
    detect: Detector
    read: Reader
    write: Writer | None = None
    kind: str = "other"
    priority: int = 0
    plugin: str = ""

    @property
    def can_write(self) -> bool:
        return self.write is not None


class FormatRegistry:
    """The formats the plugins registered, looked up by name or detected from bytes."""

    def __init__(self) -> None:
        self._handlers: dict[str, FormatHandler] = {}

    @classmethod
    def from_plugins(cls, pm: pluggy.PluginManager) -> FormatRegistry:
        """Collect every ``register_formats`` implementation of ``pm``.

        The implementations are called one by one (in registration order) rather than through
        ``pm.hook``, so a failure names the plugin that caused it.
        """
        registry = cls()
        hook = pm.hook.register_formats
        for impl in hook.get_hookimpls():
            # pluggy lets an implementation take a subset of the spec's arguments.
            kwargs = {"register": registry._register_for(impl.plugin_name)}
            try:
                impl.function(**{key: kwargs[key] for key in impl.argnames if key in kwargs})
            except TavernKitError:
                raise
            except Exception as exc:
                raise PluginError(
                    f"plugin {impl.plugin_name!r} failed in register_formats: {exc}"
                ) from exc
        return registry

    def add(self, handler: FormatHandler) -> None:
        """Register a handler; a second format of the same name is an error, not an override."""
        if not handler.name:
            raise PluginError(f"plugin {handler.plugin!r} registered a format without a name")
        for attribute in ("detect", "read"):
            if not callable(getattr(handler, attribute)):
                raise PluginError(
                    f"plugin {handler.plugin!r}: format {handler.name!r} has no callable "
                    f"{attribute}"
                )
        if handler.write is not None and not callable(handler.write):
            raise PluginError(
                f"plugin {handler.plugin!r}: format {handler.name!r} has a non-callable write"
            )
        existing = self._handlers.get(handler.name)
        if existing is not None:
            raise PluginError(
                f"format {handler.name!r} is registered by both {existing.plugin!r} "
                f"and {handler.plugin!r}"
            )
        self._handlers[handler.name] = handler

    def get(self, name: str) -> FormatHandler:
        """The handler called ``name``; an unknown name is bad input (e.g. ``--format``)."""
        handler = self._handlers.get(name)
        if handler is None:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise FormatError(f"unknown format {name!r} (known: {known})", field="format")
        return handler

    def detect(self, data: bytes) -> FormatHandler | None:
        """The first handler (by priority, then registration) whose detector accepts ``data``."""
        for handler in self.ordered():
            try:
                accepted = handler.detect(data)
            except Exception as exc:
                raise PluginError(
                    f"format {handler.name!r} of plugin {handler.plugin!r}: detect raised "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            if accepted:
                return handler
        return None

    def read(self, data: bytes, source: str) -> tuple[FormatHandler, object]:
        """Detect and read ``data``; raises ``FormatError`` when no format recognizes it."""
        handler = self.detect(data)
        if handler is None:
            reason = json_syntax_error(data, source) or "not a format tavernkit can import"
            raise FormatError(reason, source=source)
        try:
            return handler, handler.read(data, source)
        except TavernKitError:
            raise
        except Exception as exc:
            # A reader must turn bad input into FormatError; anything else is a plugin bug,
            # reported as such instead of surfacing as a bare exception from the importer.
            raise PluginError(
                f"format {handler.name!r} of plugin {handler.plugin!r} failed on {source}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def ordered(self) -> list[FormatHandler]:
        """Handlers in detection order."""
        handlers = list(self._handlers.values())
        return sorted(handlers, key=lambda h: -h.priority)  # stable: ties keep registration

    def names(self) -> list[str]:
        return list(self._handlers)

    def writers(self) -> list[FormatHandler]:
        return [handler for handler in self._handlers.values() if handler.can_write]

    def __iter__(self) -> Iterator[FormatHandler]:
        return iter(self.ordered())

    def __len__(self) -> int:
        return len(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def _register_for(self, plugin: str) -> RegisterFormat:
        def register(
            name: str,
            detect: Detector,
            read: Reader,
            write: Writer | None = None,
            *,
            kind: str = "other",
            priority: int = 0,
        ) -> None:
            self.add(
                FormatHandler(
                    name=name,
                    detect=detect,
                    read=read,
                    write=write,
                    kind=kind,
                    priority=priority,
                    plugin=plugin,
                )
            )

        return register
