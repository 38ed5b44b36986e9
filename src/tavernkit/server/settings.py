"""``ServerSettings``: what ``tavernkit serve`` and :func:`~tavernkit.server.app.create_app`
are configured with, checked once before the server starts."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

from tavernkit.egress import EgressPolicy
from tavernkit.errors import ServerConfigError
from tavernkit.log_redaction import redact_url
from tavernkit.server.coordination import DEFAULT_LOCK_LEASE_S

__all__ = [
    "ACCOUNT_TURN_RATE",
    "LOREBOOK_CEILING",
    "PASSWORD_PROFILES",
    "ConnectionLimits",
    "RateLimit",
    "ServerSettings",
    "is_loopback",
]

#: the argon2 parameter sets ``password_profile`` may name (argon2.profiles)
PASSWORD_PROFILES = frozenset({"RFC_9106_LOW_MEMORY", "RFC_9106_HIGH_MEMORY", "CHEAPEST"})

_POSTGRES_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)
_REDIS_URL = re.compile(r"^(rediss?|unix)://", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``limit`` events per ``window_s`` seconds (per user)."""

    limit: int
    window_s: float


#: the lorebook reader's own cap (``FormatLimits.lorebook_json_bytes``'s default, 256 MiB)
LOREBOOK_CEILING = 256 * 1024 * 1024

#: model calls per user per minute with accounts on, unless ``turn_rate`` says otherwise
ACCOUNT_TURN_RATE = RateLimit(60, 60.0)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one HTTP connection may hold of the server (:mod:`.connection_guard`)."""

    #: a request's line and headers must have arrived this many seconds after the connection
    #: opened, or after the request's first byte on a kept-alive connection
    head_timeout_s: float = 10.0
    #: a request body that stops arriving for this long ends its connection
    body_timeout_s: float = 30.0
    #: an idle connection between two requests is closed after this long
    keep_alive_s: float = 5.0
    #: the largest request head (request line and headers), in bytes; over it: 431
    max_head_bytes: int = 32 * 1024
    #: the most header fields one request may have; over it: 431
    max_headers: int = 100
    #: open connections per client address (an IPv6 /64 is one address; 0: no cap); the
    #: addresses uvicorn trusts for forwarded headers (a reverse proxy) are not capped
    per_address: int = 64


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (``localhost``,
    ``127.0.0.0/8``, ``::1``); ``0.0.0.0``, ``::`` and every other address do not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The server's configuration.

    ``accounts`` off (the default) serves one local user without login, and is only allowed
    on a loopback ``host``: :meth:`check` refuses any other address unless accounts are on.
    """

    #: the data dir (``None``: ``$TAVERNKIT_HOME`` or the platform's user data dir)
    home: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    accounts: bool = False
    #: the largest import upload (multipart or raw body) accepted, in bytes (``tavernkit serve
    #: --max-upload``); an upload goes to a temporary file as it arrives
    upload_max_bytes: int = 32 * 1024 * 1024
    #: the largest lorebook file an import reads, in bytes (``--lorebook-max-bytes``); the
    #: default, the reader's ceiling (``FormatLimits.lorebook_json_bytes``), admits a
    #: 20,000-entry SillyTavern book with a paragraph an entry several times over
    lorebook_max_bytes: int = LOREBOOK_CEILING
    #: failed and successful password logins per user name from one client address
    login_rate: RateLimit = field(default_factory=lambda: RateLimit(10, 60.0))
    #: password logins per client address, whatever the names
    login_address_rate: RateLimit = field(default_factory=lambda: RateLimit(30, 60.0))
    #: threads that hash passwords (argon2 runs off the event loop, 64 MiB each at a time;
    #: 0: two, less one when the process has only two CPUs or fewer)
    password_workers: int = 0
    #: logins one process checks at once, hashing or waiting to; more get a 429 at once
    login_pending: int = 8
    #: timeouts and caps of the HTTP connections (:mod:`.connection_guard`)
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    #: model calls per user: turns, tasks, profile tests, summaries, the facade's completions,
    #: MCP tool listings (every route that takes ``routes._common.ModelCall``); ``None``:
    #: :data:`ACCOUNT_TURN_RATE` with accounts on, no limit for the one local user (limits
    #: are for sharing a server; a local user's 100 parallel turns are theirs to make)
    turn_rate: RateLimit | None = None
    #: how long a browser session lasts without use, in seconds
    session_ttl_s: float = 14 * 24 * 3600.0
    #: how long a browser session lasts at most, however busy, in seconds (then sign in again)
    session_max_age_s: float = 30 * 24 * 3600.0
    #: mark session cookies ``Secure`` (set it when a TLS proxy fronts the server)
    secure_cookies: bool = False
    #: with accounts on, the bytes each user (admins aside) may store: records, avatars and
    #: other blobs, chats, memory (``tavernkit.store.storage_use``); ``None``: no quota
    user_quota_bytes: int | None = 1024 * 1024 * 1024
    #: the largest page a paged listing returns
    page_max: int = 200
    #: the shared route (brief 003's deferred server route): a connection profile of the
    #: server's own (``/shared/profiles``) that a user's turn falls back to after every
    #: attempt with the user's own keys failed; ``None``: no shared route
    shared_profile: str | None = None
    #: the admin's policy: whether personal turns may fall back to the shared route at all
    shared_fallback: bool = True
    #: fallbacks to the shared route per user (the route's quota admission)
    shared_rate: RateLimit = field(default_factory=lambda: RateLimit(30, 3600.0))
    #: the most output tokens a request the server pays for (the shared route's) asks for,
    #: in turns, tasks and the facade alike; ``None``: the shared profile's own limits
    shared_max_tokens: int | None = None
    #: the argon2 parameters passwords are hashed with (a name in ``argon2.profiles``;
    #: ``CHEAPEST`` is for tests only)
    password_profile: str = "RFC_9106_LOW_MEMORY"
    #: with accounts on, what non-admin users' requests may reach besides public addresses
    #: (:mod:`tavernkit.egress`): CIDR networks and host names (``--allow-egress``)
    allow_egress: tuple[str, ...] = ()
    #: a ``postgresql://`` URL: the data lives in that database (several processes share
    #: it); ``None``: the home's SQLite file (or ``$TAVERNKIT_DATABASE_URL``)
    database: str | None = None
    #: a ``redis://`` URL: the turn event log, chat locks, rate limits, key cooldowns and
    #: stop requests are shared through it by every process; ``None``: this process's memory
    redis: str | None = None
    #: the most connections this process opens to Redis (a command waits for a free one)
    redis_pool: int = 64
    #: the most connections this process opens to PostgreSQL (a call waits for a free one)
    database_pool: int = 20
    #: a bearer token that may read ``GET /metrics`` (besides admins; ``serve --metrics-token``)
    metrics_token: str | None = field(default=None, repr=False)
    #: at SIGTERM, how long running turns may go on before they are stopped (what they
    #: showed stored, their streams ended); the process exits a few seconds after
    shutdown_grace_s: float = 10.0
    #: how long a script's question (``/input``, ``/popup``, ``/buttons``) waits for its user
    #: before it counts as cancelled (``serve --script-answer-timeout``)
    script_answer_timeout_s: float = 600.0
    #: the chat lock's lease (a process that dies mid-turn holds the chat this long at most)
    turn_lease_s: float = DEFAULT_LOCK_LEASE_S
    #: run the garbage collector's full collections on this timer instead of on heap growth
    #: (:mod:`tavernkit.server.gc_tuning`; ``tavernkit serve`` sets 300 s); ``None``: Python's
    #: defaults (an app made in a library user's process leaves the collector alone)
    gc_full_every_s: float | None = None
    #: load what the first turn would load (:meth:`~tavernkit.facade.Tavern.warm_up`: the
    #: tokenizer, the embedded model) before listening; ``tavernkit serve`` sets it, an app
    #: made in a library user's process or a test loads them on first use
    warm_up: bool = False
    #: on a first start (nothing stored yet) with accounts off, put the demo character in the
    #: empty library (:func:`tavernkit.demo.add_demo_on_first_start`); ``tavernkit serve``
    #: sets it, an app made in a library user's process or a test starts as it finds the home
    demo_on_first_start: bool = False
    #: make a verified backup of the store this often, in seconds (``--backup-every``;
    #: :mod:`tavernkit.server.backup_schedule`); ``None``: no scheduled backups
    backup_every_s: float | None = None
    #: where the scheduled backups go (``None``: ``backups/`` in the home)
    backup_dir: Path | None = None
    #: keep the newest this many whole backups (``None``: keep them all)
    backup_keep: int | None = None

    @property
    def turn_limit(self) -> RateLimit | None:
        """The turn rate that applies: ``turn_rate`` when set, else :data:`ACCOUNT_TURN_RATE`
        with accounts on and none for the local user."""
        if self.turn_rate is not None:
            return self.turn_rate
        return ACCOUNT_TURN_RATE if self.accounts else None

    def check(self) -> ServerSettings:
        """Raise :class:`~tavernkit.errors.ServerConfigError` when the settings are unsafe or
        invalid; returns ``self``."""
        if not self.accounts and not is_loopback(self.host):
            raise ServerConfigError(
                f"refusing to serve {self.host} without accounts: anyone who can reach that "
                "address would get full access; turn accounts on (--accounts) or bind 127.0.0.1"
            )
        if not 0 <= self.port <= 65535:
            raise ServerConfigError(f"port {self.port} is not between 0 and 65535")
        if self.upload_max_bytes <= 0:
            raise ServerConfigError("upload_max_bytes must be positive")
        if not 0 < self.lorebook_max_bytes <= LOREBOOK_CEILING:
            raise ServerConfigError(
                f"lorebook_max_bytes must be positive and at most {LOREBOOK_CEILING}"
            )
        rates = (
            ("login_rate", self.login_rate),
            ("login_address_rate", self.login_address_rate),
            ("turn_rate", self.turn_rate),
            ("shared_rate", self.shared_rate),
        )
        for name, rate in rates:
            if rate is not None and (rate.limit <= 0 or rate.window_s <= 0):
                raise ServerConfigError(f"{name} needs a positive limit and window")
        if self.password_profile not in PASSWORD_PROFILES:
            raise ServerConfigError(
                f"password_profile {self.password_profile!r} is not one of "
                + ", ".join(sorted(PASSWORD_PROFILES))
            )
        if self.shared_max_tokens is not None and self.shared_max_tokens <= 0:
            raise ServerConfigError("shared_max_tokens must be positive")
        if self.user_quota_bytes is not None and self.user_quota_bytes <= 0:
            raise ServerConfigError("user_quota_bytes must be positive (None: no quota)")
        if self.password_workers < 0 or self.login_pending <= 0:
            raise ServerConfigError("password_workers must be 0 or more, login_pending positive")
        _check_connections(self.connections)
        if self.page_max <= 0:
            raise ServerConfigError("page_max must be positive")
        if self.database is not None and not _POSTGRES_URL.match(self.database):
            raise ServerConfigError(
                f"database {redact_url(self.database)!r} is not a postgresql:// URL"
            )
        if self.redis is not None and not _REDIS_URL.match(self.redis):
            raise ServerConfigError(
                f"redis {redact_url(self.redis)!r} is not a redis://, rediss:// or unix:// URL"
            )
        if self.redis_pool < 4 or self.database_pool < 2:
            raise ServerConfigError("redis_pool must be at least 4 and database_pool at least 2")
        if self.shutdown_grace_s < 0:
            raise ServerConfigError("shutdown_grace_s must be 0 or more")
        if self.script_answer_timeout_s <= 0:
            raise ServerConfigError("script_answer_timeout_s must be positive")
        if self.turn_lease_s <= 0:
            raise ServerConfigError("turn_lease_s must be positive")
        if self.backup_every_s is not None and self.backup_every_s <= 0:
            raise ServerConfigError("backup_every_s must be positive (None: no backups)")
        if self.backup_keep is not None and self.backup_keep < 1:
            raise ServerConfigError("backup_keep must be at least 1 (None: keep every backup)")
        try:
            EgressPolicy.parse(self.allow_egress)
        except ValueError as exc:
            raise ServerConfigError(f"allow_egress: {exc}") from None
        return self

    def egress_policy(self) -> EgressPolicy | None:
        """The policy non-admin users' requests go through: none with accounts off (the one
        local user owns the machine)."""
        return EgressPolicy.parse(self.allow_egress) if self.accounts else None


def _check_connections(limits: ConnectionLimits) -> None:
    timeouts = (limits.head_timeout_s, limits.body_timeout_s, limits.keep_alive_s)
    if min(timeouts) <= 0:
        raise ServerConfigError("the connection timeouts must be positive")
    if limits.max_head_bytes < 1024 or limits.max_headers <= 0:
        raise ServerConfigError("max_head_bytes must be at least 1024 and max_headers positive")
    if limits.per_address < 0:
        raise ServerConfigError("connections per address must be 0 (no cap) or more")
