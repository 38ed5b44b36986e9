"""The exception tree of tavernkit.

Every error the library raises on purpose derives from :class:`TavernKitError`, so callers can
catch one type. The tree (grown issue by issue, in the style of httpx's ``_exceptions.py``)::

    TavernKitError
    ├── FormatError            bad input file or value: names the file and the field
    │   └── LimitExceeded      a size limit (card JSON, image, archive, text field) was hit
    ├── StoreError             persistence failed
    │   ├── NotFound           no record with that id/name for that owner
    │   └── Conflict           a unique name is taken, or a concurrent write lost
    └── PluginError            a plugin failed to load or registered something invalid

Messages never carry secrets (API keys): callers pass field names and file names, not values.
"""

from __future__ import annotations

__all__ = [
    "Conflict",
    "FormatError",
    "LimitExceeded",
    "NotFound",
    "PluginError",
    "StoreError",
    "TavernKitError",
]


class TavernKitError(Exception):
    """Base class of every error tavernkit raises on purpose."""


class FormatError(TavernKitError, ValueError):
    """An input could not be read or a value could not be written in an external format.

    ``source`` is the file name (or another label such as ``"<bytes>"``), ``field`` the
    JSON path or chunk that was wrong (``"data.character_book.entries[3].keys"``).
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.reason = message
        self.source = source
        self.field = field
        parts = []
        if source:
            parts.append(str(source))
        if field:
            parts.append(f"field {field!r}")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)

    def with_source(self, source: str) -> FormatError:
        """The same error naming ``source``, for readers that learn the file name late."""
        if self.source:
            return self
        err = type(self).__new__(type(self))
        FormatError.__init__(err, self.reason, source=source, field=self.field)
        return err


class LimitExceeded(FormatError):
    """An input was larger than a configured limit (a guard against bombs and runaway files)."""


class StoreError(TavernKitError):
    """Persistence failed."""


class NotFound(StoreError, LookupError):
    """No record with that id or name exists for that owner."""


class Conflict(StoreError):
    """The write would break a uniqueness rule or lost a race."""


class PluginError(TavernKitError):
    """A plugin could not be loaded or registered something invalid."""
