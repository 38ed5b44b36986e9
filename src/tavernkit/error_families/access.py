"""What the server refuses: :class:`AccessError` and its kinds, and unsafe server settings.

Import these from :mod:`tavernkit.errors` (or ``tavernkit``), which re-exports every one."""

from __future__ import annotations

from tavernkit.error_families.base import TavernKitError
from tavernkit.error_families.provider import BadRequest


class AccessError(TavernKitError):
    """The server refused the caller. Messages never say whether a user name exists.
    ``refusal``: a stable name for why (``wrong_credentials``, ``session_expired``...), for a
    client that says it in its own language; ``None`` when only the message says."""

    def __init__(self, message: str = "", *, refusal: str | None = None) -> None:
        super().__init__(message)
        self.refusal = refusal


class NotAuthenticated(AccessError):
    """No valid bearer token, session cookie or password was given (HTTP 401)."""


class PermissionDenied(AccessError):
    """The caller is known but may not do this: not an admin, or a cookie request without the
    session's CSRF token (HTTP 403)."""


class EgressRefused(PermissionDenied, BadRequest):
    """The server's egress policy refused a destination (:mod:`tavernkit.egress`): with
    accounts on, a non-admin's request to a loopback, private, link-local, multicast,
    unspecified or cloud-metadata address, to a non-HTTP scheme, or through a redirect to one
    (HTTP 403; ``field`` names the setting when a record was refused as it was saved). Also a
    :class:`~tavernkit.errors.BadRequest`: a provider's request refused this way is not
    retried and rests no key, as the profile must change."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class TooManyAttempts(AccessError):
    """A per-user rate limit (logins, turns) was hit; ``retry_after_s`` says when the next
    attempt is allowed (HTTP 429 with ``Retry-After``)."""

    def __init__(self, message: str, *, retry_after_s: float, refusal: str | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, refusal=refusal)


class ServerConfigError(TavernKitError):
    """The server's settings are invalid or unsafe (e.g. a non-loopback address with accounts
    off): the server refuses to start."""
