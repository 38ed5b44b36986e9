"""Accounts for the server: argon2 password hashes, API tokens and browser sessions over the
store's :class:`~tavernkit.store.accounts.AccountStore`.

Secrets handed to a client (an API token, a session cookie) are 256-bit random strings that
are shown once and stored as their SHA-256. A session's CSRF token is derived from its secret
(``HMAC`` of the cookie value), so nothing more is stored and it cannot be computed without the
HttpOnly cookie. Password checks always run argon2, whether the user exists or not, so the time
of a failed login does not say which names exist; they run off the event loop
(:mod:`.passwords`).

A login is refused (429) before any hashing when the process is checking ``login_pending``
logins already, when its client address used up ``login_address_rate``, or when that name
from that address used up ``login_rate``: an attacker who names a user locks out only
themselves, never the user's own logins from elsewhere. The two rates count through the
server's :class:`~tavernkit.server.coordination.RateLimiter` (Redis's with several
processes: shared); the number checked at once is each process's own.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from importlib import resources

from tavernkit.errors import (
    FormatError,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    TooManyAttempts,
)
from tavernkit.models.base import DEFAULT_OWNER
from tavernkit.server.addresses import address_key
from tavernkit.server.coordination import RateLimiter
from tavernkit.server.passwords import Passwords, busy_refusal
from tavernkit.server.principal import Principal
from tavernkit.server.settings import RateLimit, ServerSettings
from tavernkit.store.accounts import AccountStore, TokenRecord, UserRecord

__all__ = [
    "MIN_PASSWORD",
    "Accounts",
    "IssuedToken",
    "LoginSession",
    "check_password",
    "common_passwords",
    "hash_secret",
    "user_name",
]

#: what an API token starts with, so a leaked one is easy to recognise and scan for
TOKEN_PREFIX = "tk_"
#: the fewest characters a password may have (a new user's, a changed or reset one)
MIN_PASSWORD = 10
#: the most characters a user name may have, once normalized
MAX_NAME = 200

#: the character classes a user name may not hold: controls, format characters (zero-width
#: spaces and joiners, bidi controls, soft hyphens), surrogates, private-use and unassigned
#: code points, line and paragraph separators
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: characters that show nothing without being in those classes (Unicode's default-ignorable
#: fillers and variation selectors, the blank braille pattern), as inclusive ranges
_BLANK_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


@lru_cache(maxsize=1)
def common_passwords() -> frozenset[str]:
    """The common passwords no account may have (``tavernkit/data/common-passwords.txt``:
    those of :data:`MIN_PASSWORD` characters or more, NFKC-normalized and casefolded)."""
    text = (resources.files("tavernkit.data") / "common-passwords.txt").read_text("utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def check_password(password: str, field: str = "password") -> None:
    """Refuse a password the account rules do not take (a :class:`FormatError` naming
    ``field``): shorter than :data:`MIN_PASSWORD` characters, or one of the common passwords
    (whatever its case)."""
    if len(password) < MIN_PASSWORD:
        raise FormatError(f"a password needs at least {MIN_PASSWORD} characters", field=field)
    if unicodedata.normalize("NFKC", password).casefold() in common_passwords():
        raise FormatError(
            "this password is on the list of common passwords that are guessed first; "
            "choose another",
            field=field,
        )


def _shows_nothing(char: str) -> bool:
    if unicodedata.category(char) in _REFUSED_CATEGORIES:
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _BLANK_RANGES)


def user_name(name: str, field: str = "name") -> str:
    """``name`` as users are stored and found by: NFKC-normalized (so a full-width or
    ligature spelling is the same name as the plain one) and trimmed. Raises a
    :class:`FormatError` naming ``field`` for an empty or too long name, or one holding an
    invisible or control character (a zero-width space, a bidi control...)."""
    normal = unicodedata.normalize("NFKC", name).strip()
    if not normal:
        raise FormatError("a user name cannot be blank", field=field)
    if len(normal) > MAX_NAME:
        raise FormatError(f"a user name has at most {MAX_NAME} characters", field=field)
    for char in normal:
        if _shows_nothing(char):
            raise FormatError(
                f"a user name cannot hold invisible or control characters (U+{ord(char):04X})",
                field=field,
            )
    return normal


def hash_secret(secret: str) -> str:
    """The stored form of a token or session secret (SHA-256 hex)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def csrf_for(session_secret: str) -> str:
    """The CSRF token of the session whose cookie holds ``session_secret``."""
    return hmac.new(session_secret.encode("utf-8"), b"tavernkit-csrf", "sha256").hexdigest()


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A new API token: ``token`` is shown this once and never again."""

    record: TokenRecord
    token: str


@dataclass(frozen=True, slots=True)
class LoginSession:
    """A new browser session: ``secret`` goes in the cookie, ``csrf_token`` in the
    ``X-CSRF-Token`` header of every request that changes something."""

    user: UserRecord
    secret: str
    csrf_token: str
    expires: datetime


def _address_refusal(retry_after_s: float) -> TooManyAttempts:
    return TooManyAttempts(
        "too many login attempts from this address; try again later",
        retry_after_s=retry_after_s,
        refusal="logins",
    )


def _principal(user: UserRecord, via: str, session_id: str | None = None) -> Principal:
    return Principal(
        user_id=user.id,
        owner=user.owner,
        is_admin=user.is_admin,
        via="token" if via == "token" else "session",
        name=user.name,
        session_id=session_id,
    )


class Accounts:
    """Users, tokens, sessions and the login rate limit of one server."""

    def __init__(
        self,
        store: AccountStore,
        settings: ServerSettings,
        limiter: RateLimiter,
    ) -> None:
        self._store = store
        self._settings = settings
        self._limiter = limiter
        self._passwords = Passwords(
            settings.password_profile,
            workers=settings.password_workers,
            pending=settings.login_pending,
        )
        #: client addresses whose login limit refused them, until when (monotonic seconds)
        self._refused_until: dict[str, float] = {}

    @property
    def store(self) -> AccountStore:
        return self._store

    def close(self) -> None:
        """Stop the password threads (the app's lifespan does at shutdown)."""
        self._passwords.close()

    # -- users --------------------------------------------------------------------------
    async def create_user(self, name: str, password: str, *, is_admin: bool = False) -> UserRecord:
        """A new user. The first user made gets the default owner, so the data of the local
        single-user mode becomes theirs when accounts are turned on; every other user gets an
        owner of their own."""
        name = user_name(name)
        check_password(password)
        first = await self._store.count_users() == 0
        owner = DEFAULT_OWNER if first else f"user:{secrets.token_hex(8)}"
        hashed = await self._passwords.hash(password)
        return await self._store.create_user(name, hashed, owner=owner, is_admin=is_admin)

    async def authenticate(
        self, name: str, password: str, *, address: str | None = None
    ) -> UserRecord:
        """The user whose name and password these are, for a client at ``address`` (its IP;
        ``None``: unknown). Raises :class:`~tavernkit.errors.TooManyAttempts` past the login
        limits (see the module docstring), before any hashing, and
        :class:`~tavernkit.errors.NotAuthenticated` otherwise, never saying whether the name
        exists. The name is normalized as :func:`user_name` does (a
        :class:`~tavernkit.errors.FormatError` naming ``name`` for one no user can have)."""
        return await self._authenticate(user_name(name), password, address)

    async def _authenticate(self, name: str, password: str, address: str | None) -> UserRecord:
        refused = self.quick_refusal(address)
        if refused is not None:
            raise refused
        where = address_key(address)
        with self._passwords.admit():
            rate = self._settings.login_address_rate
            decision = await self._limiter.hit(
                f"login-from:{where}", limit=rate.limit, window_s=rate.window_s
            )
            if not decision.allowed:
                # no login from there before the window moves: later ones are refused here
                self._refused_until[where] = time.monotonic() + decision.retry_after_s
                if len(self._refused_until) > 4096:
                    self._forget_refusals()
                raise _address_refusal(decision.retry_after_s)
            await self._count(
                f"login:{where}|{name.strip().casefold()}",
                self._settings.login_rate,
                "too many login attempts for this user; try again later",
            )
            found: tuple[UserRecord, str] | None
            try:
                found = await self._store.find_user(name)
            except NotFound:
                found = None
            # one argon2 check either way (an unknown name's against a dummy hash)
            matched = await self._passwords.verify(found[1] if found else None, password)
            if found is None or not matched:
                raise NotAuthenticated("wrong user name or password", refusal="wrong_credentials")
            user, stored = found
            if self._passwords.needs_rehash(stored):
                await self._store.set_password_hash(user.id, await self._passwords.hash(password))
        return user

    async def change_password(
        self,
        user_id: str,
        old: str,
        new: str,
        *,
        keep_session_id: str | None = None,
        keep_token: str | None = None,
        address: str | None = None,
    ) -> None:
        """The user's own change (from a client at ``address``, counted as a login): ``old``
        must be their password (checked under the login limits; a
        :class:`~tavernkit.errors.PermissionDenied` otherwise, and nothing changes). Their
        other sessions end and their other API tokens are revoked: the caller's session
        ``keep_session_id`` or token ``keep_token`` stays."""
        check_password(new, "new_password")
        user = await self._store.get_user(user_id)
        try:
            found = await self._authenticate(user.name, old, address)
        except NotAuthenticated:
            found = None
        if found is None or found.id != user_id:
            raise PermissionDenied(
                "the current password is wrong; nothing was changed", refusal="wrong_password"
            )
        await self._store.change_password(
            user_id,
            await self._passwords.hash(new),
            keep_session_id=keep_session_id,
            keep_token_hash=hash_secret(keep_token) if keep_token else None,
        )

    async def reset_password(
        self,
        user_id: str,
        new: str,
        *,
        keep_session_id: str | None = None,
        keep_token: str | None = None,
    ) -> None:
        """An admin sets ``user_id``'s password: every session and token of that user ends
        (but the admin's own session or token, when they reset their own password)."""
        check_password(new)
        await self._store.change_password(
            user_id,
            await self._passwords.hash(new),
            keep_session_id=keep_session_id,
            keep_token_hash=hash_secret(keep_token) if keep_token else None,
        )

    def quick_refusal(self, address: str | None) -> TooManyAttempts | None:
        """The 429 a login from ``address`` gets now without any work (no store, no limiter,
        no hashing): when this process checks ``login_pending`` logins already, or when the
        address's limit refused it and its window has not moved since. ``None``: the login
        goes on to :meth:`authenticate`'s checks. What :mod:`.login_gate` asks before the
        request is even routed."""
        if self._passwords.busy:
            return busy_refusal()
        if self._refused_until:
            where = address_key(address)
            until = self._refused_until.get(where)
            if until is not None:
                left = until - time.monotonic()
                if left > 0:
                    return _address_refusal(left)
                del self._refused_until[where]
        return None

    def _forget_refusals(self) -> None:
        now = time.monotonic()
        for where in [w for w, until in self._refused_until.items() if until <= now]:
            del self._refused_until[where]

    async def _count(self, key: str, rate: RateLimit, refusal: str) -> None:
        decision = await self._limiter.hit(key, limit=rate.limit, window_s=rate.window_s)
        if not decision.allowed:
            raise TooManyAttempts(refusal, retry_after_s=decision.retry_after_s, refusal="logins")

    # -- sessions -----------------------------------------------------------------------
    async def login(self, name: str, password: str, *, address: str | None = None) -> LoginSession:
        user = await self.authenticate(name, password, address=address)
        secret = secrets.token_urlsafe(32)
        expires = datetime.now(UTC) + timedelta(seconds=self._settings.session_ttl_s)
        await self._store.create_session(user.id, hash_secret(secret), expires=expires)
        return LoginSession(user, secret, csrf_for(secret), expires)

    async def logout(self, session_secret: str) -> None:
        await self._store.delete_session(hash_secret(session_secret))

    async def principal_for_session(self, session_secret: str) -> Principal | None:
        """The principal of a live session: used within the idle lifetime
        (``session_ttl_s``) and started within the absolute one (``session_max_age_s``),
        however busy it has been since."""
        now = datetime.now(UTC)
        found = await self._store.user_for_session(
            hash_secret(session_secret),
            now=now,
            extend_to=now + timedelta(seconds=self._settings.session_ttl_s),
            started_after=now - timedelta(seconds=self._settings.session_max_age_s),
        )
        if found is None:
            return None
        session, user = found
        return _principal(user, "session", session.id)

    # -- API tokens ---------------------------------------------------------------------
    async def issue_token(self, user_id: str, label: str = "") -> IssuedToken:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = await self._store.add_token(user_id, hash_secret(token), label=label)
        return IssuedToken(record, token)

    async def principal_for_token(self, token: str) -> Principal | None:
        if not token.startswith(TOKEN_PREFIX):
            return None
        user = await self._store.user_for_token(hash_secret(token))
        return None if user is None else _principal(user, "token")
