"""``tavernkit serve``: the HTTP API (FastAPI on uvicorn; the ``server`` extra).

On 127.0.0.1 with no options it serves the one local user without login, with the embedded
model as the default profile, as ``tavernkit chat`` does. Any other address needs
``--accounts``; ``--create-admin NAME`` makes the first admin (the password comes from
``$TAVERNKIT_ADMIN_PASSWORD`` or a prompt), whose data is the local user's.

Several processes behind a load balancer: ``--database postgresql://...`` (or
``$TAVERNKIT_DATABASE_URL``) puts the data in PostgreSQL and ``--redis redis://...`` (or
``$TAVERNKIT_REDIS_URL``) shares turns, locks, rate limits, key cooldowns and stops.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from tavernkit.cli._common import HomeOption, fail, gathered
from tavernkit.cli.error_text import error_text
from tavernkit.errors import Conflict, NotFound, ServerConfigError, TavernKitError
from tavernkit.facade import Tavern
from tavernkit.server.coordination import DEFAULT_LOCK_LEASE_S
from tavernkit.server.settings import LOREBOOK_CEILING, RateLimit, ServerSettings
from tavernkit.store.backup_check import parse_interval
from tavernkit.store.secret_key import (
    PREVIOUS_SECRET_KEY_ENV,
    PREVIOUS_SECRET_KEY_FILE_ENV,
    SECRET_KEY_ENV,
    SECRET_KEY_FILE_ENV,
    check_secret_key_settings,
)

try:
    from tavernkit.server.access_log import log_to_stderr
    from tavernkit.server.accounts import Accounts, user_name
    from tavernkit.server.app import create_app
    from tavernkit.server.coordination_memory import InMemoryRateLimiter
    from tavernkit.server.listen import listening_socket, uvicorn_config
    from tavernkit.server.shutdown import LINGER_S, GracefulServer
except ModuleNotFoundError as _missing:  # the 'server' extra is not installed
    _MISSING: str | None = _missing.name or "fastapi"
else:
    _MISSING = None

__all__ = ["ServeOptions", "parse_size", "serve_command"]

_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str, *, what: str) -> int:
    """A size a user writes (``1048576``, ``512K``, ``64M``, ``2G``, ``64MiB``; binary units)
    in bytes; anything else, or a size that is not positive, is a :class:`ServerConfigError`
    naming ``what``."""
    raw = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = (raw[:-1], raw[-1]) if raw and raw[-1] in _UNITS else (raw, "")
    try:
        value = float(number) * _UNITS.get(unit, 1)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**50:  # NaN and infinity too
        raise ServerConfigError(
            f"{what} must be a positive size in bytes, or with K, M or G (e.g. 256M): {text!r}"
        )
    return int(value)


PASSWORD_ENV = "TAVERNKIT_ADMIN_PASSWORD"
DATABASE_ENV = "TAVERNKIT_DATABASE_URL"
REDIS_ENV = "TAVERNKIT_REDIS_URL"

#: how often ``tavernkit serve`` runs a full garbage collection (seconds)
SERVE_FULL_GC_EVERY_S = 300.0


async def _create_admin(settings: ServerSettings, name: str, password: str) -> None:
    async with Tavern(settings.home, database=settings.database) as tk:
        accounts = Accounts(tk.store, settings, InMemoryRateLimiter())
        try:
            await accounts.create_user(name, password, is_admin=True)
        except Conflict:
            # a container keeps $TAVERNKIT_CREATE_ADMIN set: on a restart, or when another
            # process of the deployment made the admin first, it exists already (kept as it is)
            if not await _is_admin(tk, name):
                raise
        finally:
            accounts.close()


async def _is_admin(tk: Tavern, name: str) -> bool:
    try:
        user, _hash = await tk.store.find_user(user_name(name))
    except NotFound:
        return False
    return user.is_admin


def _interval(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_interval(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--backup-every") from None


def use_secret_key_file(path: Path | None, previous: Path | None = None) -> None:
    """Make ``path`` (``--secret-key-file``) this process's secret key file, and ``previous``
    (``--previous-secret-key-file``) its previous one, and refuse a given key that cannot be
    used, before the server listens. The stores read the keys from the environment when they
    first need them, so the options are passed on as their variables."""
    if path is not None:
        os.environ[SECRET_KEY_FILE_ENV] = str(path)
    if previous is not None:
        os.environ[PREVIOUS_SECRET_KEY_FILE_ENV] = str(previous)
    check_secret_key_settings()


@dataclass(frozen=True)
class ServeOptions:
    """``tavernkit serve``'s options, each with its environment variable (``--help`` lists
    them): the command receives them as one value (:func:`~tavernkit.cli._common.gathered`)."""

    host: Annotated[
        str,
        typer.Option(
            "--host", envvar="TAVERNKIT_HOST", show_envvar=True, help="Address to listen on."
        ),
    ] = "127.0.0.1"
    port: Annotated[
        int,
        typer.Option(
            "--port", envvar="TAVERNKIT_PORT", show_envvar=True, help="Port (0: any free one)."
        ),
    ] = 8000
    accounts: Annotated[
        bool,
        typer.Option(
            "--accounts",
            envvar="TAVERNKIT_ACCOUNTS",
            show_envvar=True,
            help="Require sign-in (needed off 127.0.0.1).",
        ),
    ] = False
    create_admin: Annotated[
        str | None,
        typer.Option(
            "--create-admin",
            envvar="TAVERNKIT_CREATE_ADMIN",
            show_envvar=True,
            help=f"Create this admin first (password: ${PASSWORD_ENV}); an admin of that name "
            "already there is kept as it is.",
        ),
    ] = None
    shared_profile: Annotated[
        str | None,
        typer.Option(
            "--shared-profile",
            envvar="TAVERNKIT_SHARED_PROFILE",
            show_envvar=True,
            help="The server's profile (/shared/profiles) users' turns fall back to.",
        ),
    ] = None
    shared_max_tokens: Annotated[
        int | None,
        typer.Option(
            "--shared-max-tokens",
            envvar="TAVERNKIT_SHARED_MAX_TOKENS",
            show_envvar=True,
            min=1,
            help="The most output tokens a request on the shared profile may ask for.",
        ),
    ] = None
    secure_cookies: Annotated[
        bool,
        typer.Option(
            "--secure-cookies",
            envvar="TAVERNKIT_SECURE_COOKIES",
            show_envvar=True,
            help="Mark session cookies Secure (behind TLS).",
        ),
    ] = False
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            envvar=DATABASE_ENV,
            show_envvar=True,
            help="postgresql:// URL of the data (shared by several processes).",
        ),
    ] = None
    secret_key_file: Annotated[
        Path | None,
        typer.Option(
            "--secret-key-file",
            envvar=SECRET_KEY_FILE_ENV,
            show_envvar=True,
            help="A file holding the secret key stored API keys are sealed with (or the key "
            f"itself in ${SECRET_KEY_ENV}); the same for every process of a deployment. "
            "Default: one made for this host in the data dir.",
        ),
    ] = None
    previous_secret_key_file: Annotated[
        Path | None,
        typer.Option(
            "--previous-secret-key-file",
            envvar=PREVIOUS_SECRET_KEY_FILE_ENV,
            show_envvar=True,
            help="During a rolling rotation: a file holding the previous secret key (or the key "
            f"itself in ${PREVIOUS_SECRET_KEY_ENV}); secrets sealed with it still open, and new "
            "ones are sealed with it until tavernkit rotate-secret-key has run.",
        ),
    ] = None
    redis: Annotated[
        str | None,
        typer.Option(
            "--redis",
            envvar=REDIS_ENV,
            show_envvar=True,
            help="redis:// URL the processes share turns, locks, limits and cooldowns through.",
        ),
    ] = None
    redis_pool: Annotated[
        int,
        typer.Option(
            "--redis-pool",
            envvar="TAVERNKIT_REDIS_POOL",
            show_envvar=True,
            min=4,
            help="Most Redis connections of this process (commands wait for a free one).",
        ),
    ] = 64
    database_pool: Annotated[
        int,
        typer.Option(
            "--database-pool",
            envvar="TAVERNKIT_DATABASE_POOL",
            show_envvar=True,
            min=2,
            help="Most PostgreSQL connections of this process (calls wait for a free one).",
        ),
    ] = 20
    lock_lease: Annotated[
        float,
        typer.Option(
            "--lock-lease",
            envvar="TAVERNKIT_LOCK_LEASE",
            show_envvar=True,
            help="Seconds a chat stays locked by a process that died mid-turn (its "
            "watchers learn it half a lease later).",
        ),
    ] = DEFAULT_LOCK_LEASE_S
    shutdown_grace: Annotated[
        float,
        typer.Option(
            "--shutdown-grace",
            envvar="TAVERNKIT_SHUTDOWN_GRACE",
            show_envvar=True,
            min=0,
            help="Seconds running turns may go on after SIGTERM before they are stopped.",
        ),
    ] = 10.0
    script_answer_timeout: Annotated[
        float,
        typer.Option(
            "--script-answer-timeout",
            envvar="TAVERNKIT_SCRIPT_ANSWER_TIMEOUT",
            show_envvar=True,
            min=1,
            help="Seconds a script's question (/input, /popup, /buttons) waits for its user "
            "before it counts as cancelled.",
        ),
    ] = 600.0
    turn_rate: Annotated[
        int | None,
        typer.Option(
            "--turn-rate",
            envvar="TAVERNKIT_TURN_RATE",
            show_envvar=True,
            help="Model calls (turns, tasks, tests...) each user may make per minute "
            "(default: 60 with accounts, no limit for the local user).",
        ),
    ] = None
    allow_egress: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-egress",
            envvar="TAVERNKIT_ALLOW_EGRESS",
            show_envvar=True,
            help="A CIDR network or host name users' requests may reach although it is "
            "loopback, private or link-local (repeatable; accounts on).",
        ),
    ] = None
    max_upload: Annotated[
        str,
        typer.Option(
            "--max-upload",
            envvar="TAVERNKIT_MAX_UPLOAD",
            show_envvar=True,
            help="The largest upload (an import: a 60 MB chat, a folder of cards) accepted: "
            "bytes, or a number with K, M or G (binary: 256M is 256 MiB).",
        ),
    ] = "32M"
    lorebook_max_bytes: Annotated[
        int,
        typer.Option(
            "--lorebook-max-bytes",
            envvar="TAVERNKIT_LOREBOOK_MAX_BYTES",
            show_envvar=True,
            help="The largest lorebook file imported, in bytes (at most 256 MiB, the default; "
            "an upload is also held to the upload cap).",
        ),
    ] = LOREBOOK_CEILING
    user_quota: Annotated[
        int,
        typer.Option(
            "--user-quota",
            envvar="TAVERNKIT_USER_QUOTA",
            show_envvar=True,
            help="Bytes each user (admins aside) may store with accounts on (0: no quota).",
        ),
    ] = 1024 * 1024 * 1024
    backup_every: Annotated[
        str | None,
        typer.Option(
            "--backup-every",
            envvar="TAVERNKIT_BACKUP_EVERY",
            show_envvar=True,
            help="Make a verified backup of the data this often (6h, 30m, 1d; off by default).",
        ),
    ] = None
    backup_dir: Annotated[
        Path | None,
        typer.Option(
            "--backup-dir",
            envvar="TAVERNKIT_BACKUP_DIR",
            show_envvar=True,
            help="Where scheduled backups go (default: HOME/backups).",
        ),
    ] = None
    backup_keep: Annotated[
        int | None,
        typer.Option(
            "--backup-keep",
            min=1,
            envvar="TAVERNKIT_BACKUP_KEEP",
            show_envvar=True,
            help="Keep the newest N backups (default: all).",
        ),
    ] = None
    metrics_token: Annotated[
        str | None,
        typer.Option(
            "--metrics-token",
            envvar="TAVERNKIT_METRICS_TOKEN",
            show_envvar=True,
            show_default=False,
            help="With accounts on, a bearer token that may read GET /metrics (and nothing "
            "else); admins always may. Prefer the environment variable to the command line.",
        ),
    ] = None
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log/--no-access-log",
            envvar="TAVERNKIT_ACCESS_LOG",
            show_envvar=True,
            help="Write one JSON line per request to stderr (route, status, time, user hash).",
        ),
    ] = True
    home: HomeOption = None


@gathered(ServeOptions)
def serve_command(options: ServeOptions) -> None:
    """Serve the HTTP API (local user on 127.0.0.1; accounts for anything else)."""
    settings = _server_settings(options)
    if _MISSING is not None:
        raise fail(f"the server needs {_MISSING!r}: pip install 'tavernkit[server]'")
    try:
        settings.check()
        use_secret_key_file(options.secret_key_file, options.previous_secret_key_file)
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    if options.create_admin is not None:
        _make_admin(settings, options.create_admin)
    _serve(settings, options)


def _server_settings(options: ServeOptions) -> ServerSettings:
    """The server's settings from the command's options (a bad size ends the command)."""
    o = options
    try:
        upload_max_bytes = parse_size(o.max_upload, what="--max-upload")
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    return ServerSettings(
        home=Path(o.home) if o.home is not None else None,
        host=o.host,
        port=o.port,
        accounts=o.accounts or o.create_admin is not None,
        secure_cookies=o.secure_cookies,
        shared_profile=o.shared_profile,
        shared_max_tokens=o.shared_max_tokens,
        database=o.database or None,
        redis=o.redis or None,
        redis_pool=o.redis_pool,
        database_pool=o.database_pool,
        metrics_token=o.metrics_token or None,
        turn_lease_s=o.lock_lease,
        shutdown_grace_s=o.shutdown_grace,
        script_answer_timeout_s=o.script_answer_timeout,
        turn_rate=RateLimit(o.turn_rate, 60.0) if o.turn_rate is not None else None,
        allow_egress=tuple(o.allow_egress or ()),
        user_quota_bytes=o.user_quota or None,
        lorebook_max_bytes=o.lorebook_max_bytes,
        upload_max_bytes=upload_max_bytes,
        # this process only serves: full collections on a timer (tavernkit.server.gc_tuning)
        gc_full_every_s=SERVE_FULL_GC_EVERY_S,
        # the tokenizer and the embedded model load before it listens, not in the first turn
        warm_up=True,
        # a fresh home gets the demo character (Wren), as the web UI's button adds it
        demo_on_first_start=True,
        backup_every_s=_interval(o.backup_every),
        backup_dir=o.backup_dir,
        backup_keep=o.backup_keep,
    )


def _make_admin(settings: ServerSettings, name: str) -> None:
    """``--create-admin``: the admin made before the server starts (password from
    ``$TAVERNKIT_ADMIN_PASSWORD`` or a prompt)."""
    password = os.environ.get(PASSWORD_ENV) or typer.prompt(
        f"password for {name}", hide_input=True, confirmation_prompt=True
    )
    try:
        asyncio.run(_create_admin(settings, name, password))
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None


def _serve(settings: ServerSettings, options: ServeOptions) -> None:
    """Listen, say where, and serve until stopped (a graceful shutdown on a signal)."""
    host = options.host
    app = create_app(settings)
    try:
        sock = listening_socket(host, options.port)
    except TavernKitError as exc:
        raise fail(error_text(exc)) from None
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    who = "accounts on" if settings.accounts else "one local user, no login"
    if settings.database is not None:
        who += ", PostgreSQL"
    if settings.redis is not None:
        who += ", Redis"
    if settings.backup_every_s is not None:
        who += f", backups every {options.backup_every}"
    typer.echo(f"tavernkit serving http://{shown}:{sock.getsockname()[1]} ({who})")
    if options.access_log:
        log_to_stderr()
    config = uvicorn_config(
        app, settings, log_level="warning", access_log=False, timeout_graceful_shutdown=LINGER_S
    )
    server = GracefulServer(config, app=app, grace_s=settings.shutdown_grace_s)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
