"""The roots of the tree (:class:`TavernKitError`, :class:`RequestAborted` and the aborts) and the
families too small for a module of their own: formats, the store, plugins, templates, tools.

Import these from :mod:`tavernkit.errors` (or ``tavernkit``), which re-exports every one."""

from __future__ import annotations


class TavernKitError(Exception):
    """Base class of every error tavernkit raises on purpose."""


class RequestAborted(Exception):
    """The base of every abort type: :class:`tavernkit.generation.abort.AbortError` (a
    signal's ``throw_if_aborted``) and the providers' internal ``Aborted``. Aborts are matched
    by this type (never by class name); it is not a :class:`TavernKitError`, because an abort
    is the caller's choice, not a failure a ``except TavernKitError`` should report."""


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


class SecretKeyError(StoreError):
    """A stored API key cannot be sealed or opened with this process's secret key (the key
    that encrypts key secrets in the database): none usable was given, it is not the key the
    secrets were sealed with, or a sealed secret was altered. The message names no path, no
    key id and no secret: it may reach a user, and says what the operator must give."""


class StoreUnavailable(StoreError):
    """The database could not be reached, lost its connection or had no free connection in
    time: nothing about the request is wrong, trying again later may work (HTTP 503). The
    message names no address."""


class ShuttingDown(TavernKitError):
    """The server process is shutting down and starts nothing new (HTTP 503: another process
    takes the request, or this one once restarted)."""


class CoordinationError(TavernKitError):
    """What the server processes share (Redis: turn event logs, chat locks, rate limits, key
    cooldowns) could not be reached or answered wrongly. The message names the server without
    its password."""


class BackupError(StoreError):
    """A backup could not be made, verified or restored, or one on disk is damaged (a file
    missing, a hash that differs, a database that fails its integrity check). The message
    names the backup and what was wrong."""


class NotFound(StoreError, LookupError):
    """No record with that id or name exists for that owner."""


class Conflict(StoreError):
    """The write would break a uniqueness rule or lost a race."""


class HomeNotEmpty(Conflict):
    """A restore was aimed at a home or database that already holds data (restore only into
    an empty one, so nothing is overwritten). ``where`` names it, ``found`` what is there."""

    def __init__(self, message: str, *, where: str, found: str) -> None:
        super().__init__(message)
        self.where = where
        self.found = found


class StaleRevision(Conflict):
    """A change was sent against a revision that is no longer the current one: another tab
    or device changed the record or message since this one was read. Nothing was written;
    ``revision`` is the current revision and ``current`` what the thing holds now (for a
    message ``{"text": ...}``), so a front end can offer to reload instead of overwriting."""

    def __init__(
        self, message: str, *, revision: str, current: dict[str, object] | None = None
    ) -> None:
        super().__init__(message)
        self.revision = revision
        self.current = current


class NameTaken(Conflict):
    """An import names a record that exists and differs. ``kind`` and ``name`` say which, so
    each front end offers its own way to overwrite it (the CLI's ``--replace``, the web UI's
    Replace button, the API's ``?replace=true``)."""

    def __init__(self, message: str, *, kind: str, name: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name


class PluginError(TavernKitError):
    """A plugin could not be loaded or registered something invalid."""


class TemplateError(TavernKitError, ValueError):
    """A ChatLuna-dialect template cannot be rendered: a block condition (``{if ...}``,
    ``{for ...}``, ``{while ...}``, ``{repeat ...}``) does not parse or fails, which fails the
    whole render as in ChatLuna (an expression tag that fails renders ``''`` instead)."""


class ExprError(ValueError):
    """Internal to the ChatLuna dialect: an expression that does not parse (its tag is kept
    as text) or fails (its tag renders ``''``); in a block condition it becomes a
    :class:`TemplateError`."""


class ToolSourceError(TavernKitError):
    """An MCP server registration is invalid, its server could not be started or reached, or
    a tool call on it failed. ``source`` is the registration's name. The message never holds
    the registration's credential."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"MCP server {source!r}: {message}" if source else message)


class ToolSourceUnavailable(ToolSourceError):
    """An MCP server could not be started or reached, did not answer in time, or a tool call
    on it failed: the registration may be fine, its server is not (HTTP 502 on the server)."""


class ChatBusy(TavernKitError):
    """A chat already has a turn generating; turns of one chat never interleave. Ask again
    with ``interrupt=True`` to stop the running turn (its delivered text is kept) first."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"chat {chat_id!r} is already generating a reply")


class AbortError(RequestAborted):
    """Raised by :meth:`AbortSignal.throw_if_aborted`; a
    :class:`~tavernkit.errors.RequestAborted`, which
    :func:`tavernkit.task_errors.task_error_from` maps to ``aborted``."""


class Aborted(RequestAborted):
    """The caller aborted the request (internal; providers turn it into a finish event)."""
