"""``create_app``: the FastAPI application of ``tavernkit serve``.

The app is a face over :class:`~tavernkit.facade.Tavern`: its lifespan opens the data home's
store (or takes an open Tavern), ``app.state.server`` holds the
:class:`~tavernkit.server.state.ServerState` the routes share, every router of
:data:`~tavernkit.server.routes.ROUTERS` is included, then the plugins' ``register_routes``
routes, and every error leaves as typed JSON (:mod:`tavernkit.server.errors`).

Several processes (``settings.database`` and ``settings.redis``): the data is in PostgreSQL,
and the turn event log, the chat locks, the rate limits, the environment keys' cooldowns, the
stop requests and the open questions of interactive scripts are Redis's
(:mod:`tavernkit.server.redis_coordination`), so any process serves any request; stored keys'
cooldowns are rows of the shared database already.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from tavernkit.demo import add_demo_on_first_start
from tavernkit.errors import CoordinationError, ServerConfigError
from tavernkit.facade import Tavern
from tavernkit.formats import FormatLimits
from tavernkit.generation.keys import CooldownStore
from tavernkit.plugins.manager import add_plugin_routes, get_plugin_manager
from tavernkit.server.access_log import AccessLog
from tavernkit.server.accounts import Accounts
from tavernkit.server.backup_schedule import start_backups
from tavernkit.server.body_limit import BodyLimit
from tavernkit.server.coordination import ChatLock, RateLimiter, TurnEventLog, TurnStops
from tavernkit.server.coordination_local import InMemoryChatLock, InMemoryTurnEventLog
from tavernkit.server.coordination_memory import InMemoryRateLimiter
from tavernkit.server.errors import ERROR_RESPONSES, install_error_handlers
from tavernkit.server.gc_tuning import full_collections, tune_for_serving
from tavernkit.server.login_gate import LoginGate
from tavernkit.server.metrics import ServerMetrics
from tavernkit.server.routes import ROUTERS
from tavernkit.server.routes.openai import FACADE_PREFIX, too_large_body
from tavernkit.server.script_runs import ScriptRuns
from tavernkit.server.settings import ServerSettings
from tavernkit.server.shared_route import SharedRoutes
from tavernkit.server.state import ServerState
from tavernkit.server.turns import TurnHub
from tavernkit.server.warmup import prime_routes

try:  # the 'scale' extra: only a server with settings.redis needs it
    from tavernkit.server import redis_coordination
    from tavernkit.server.redis_script_questions import RedisScriptQuestions
except ModuleNotFoundError:  # pragma: no cover - the test extra installs it
    redis_coordination = None  # type: ignore[assignment]

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(
    settings: ServerSettings,
    *,
    tavern: Tavern | None = None,
    limiter: RateLimiter | None = None,
    event_log: TurnEventLog | None = None,
    chat_lock: ChatLock | None = None,
    cooldowns: CooldownStore | None = None,
    stops: TurnStops | None = None,
) -> FastAPI:
    """The server app. ``tavern`` defaults to one over ``settings.home`` (and
    ``settings.database``); a Tavern the caller passed open stays open after the app stops,
    one the app opened is closed. ``limiter``, ``event_log``, ``chat_lock`` (the turns'
    events and the one-turn-per-chat lock), ``cooldowns`` (the environment keys') and
    ``stops`` (stop requests to other processes) default to ``settings.redis``'s when it is
    set, else to this process's memory (no ``stops``). At start the app subscribes to the stop
    requests, so a Redis it cannot reach fails the start with
    :class:`~tavernkit.errors.CoordinationError`. At shutdown running turns get a few seconds
    to finish, then are stopped keeping what they showed. Raises
    :class:`~tavernkit.errors.ServerConfigError` for unsafe settings (or ``settings.redis``
    without the ``scale`` extra)."""
    settings.check()
    if settings.redis is not None and redis_coordination is None:
        raise ServerConfigError("settings.redis needs redis-py: pip install 'tavernkit[scale]'")
    metrics = ServerMetrics()  # this app's own registry (module metrics)
    if settings.redis is not None:
        metrics.pool_size.labels(pool="redis").set(settings.redis_pool)
    if settings.database is not None:
        metrics.pool_size.labels(pool="database").set(settings.database_pool)
    given = _Given(tavern, limiter, event_log, chat_lock, cooldowns, stops)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as exit_stack:
            app.state.server = await _start(app, settings, given, metrics, exit_stack)
            try:
                yield
            finally:
                app.state.server = None

    return _app(settings, lifespan, tavern)


@dataclass(frozen=True, slots=True)
class _Given:
    """What the caller of :func:`create_app` passed in place of the defaults."""

    tavern: Tavern | None
    limiter: RateLimiter | None
    event_log: TurnEventLog | None
    chat_lock: ChatLock | None
    cooldowns: CooldownStore | None
    stops: TurnStops | None


async def _start(
    app: FastAPI,
    settings: ServerSettings,
    given: _Given,
    metrics: ServerMetrics,
    exit_stack: contextlib.AsyncExitStack,
) -> ServerState:
    """The app's start: the coordination (Redis or this process), the Tavern open, the turn
    hub, the demo, the accounts and backups; warmed up before it listens. What it opened is
    closed by ``exit_stack``."""
    shared = None
    if settings.redis is not None and redis_coordination is not None:
        shared = redis_coordination.coordination_from_url(
            settings.redis, max_connections=settings.redis_pool
        )
        exit_stack.push_async_callback(shared.aclose)
    tk = await _open_tavern(settings, given.tavern, exit_stack)
    metrics.watch_store(tk.store)
    key_cooldowns = given.cooldowns or (shared.cooldowns if shared is not None else None)
    if key_cooldowns is not None:
        # before any owner's view is made: each view takes the Tavern's
        tk.runtime.key_cooldowns = key_cooldowns
    hub = TurnHub(
        given.event_log or (shared.events if shared else InMemoryTurnEventLog()),
        given.chat_lock or (shared.locks if shared else InMemoryChatLock()),
        lease_s=settings.turn_lease_s,
        stops=given.stops or (shared.stops if shared is not None else None),
        metrics=metrics,
    )
    exit_stack.push_async_callback(hub.close)
    if hub.stops is not None:
        await _listen_for_stops(hub, exit_stack)
    if settings.demo_on_first_start and not settings.accounts:
        # a fresh install has someone to talk to, in the UI and the facade alike
        await add_demo_on_first_start(tk)
    rate = given.limiter or (shared.rate_limiter if shared else InMemoryRateLimiter())
    shared_route = SharedRoutes(settings, tk, tk.store, rate) if settings.accounts else None
    accounts = Accounts(tk.store, settings, rate)
    exit_stack.callback(accounts.close)
    backups = await start_backups(settings, tk, exit_stack)
    state = ServerState(
        settings=settings,
        tavern=tk,
        accounts=accounts,
        limiter=rate,
        turns=hub,
        metrics=metrics,
        shared=shared_route,
        egress=settings.egress_policy(),
        backups=backups,
        probes={"redis": shared.client.ping} if shared is not None else {},
        script_runs=await _script_runs(settings, shared, exit_stack),
    )
    app.state.server = state
    await _before_listening(app, settings, tk, exit_stack)
    return state


async def _script_runs(
    settings: ServerSettings,
    shared: redis_coordination.RedisCoordination | None,
    exit_stack: contextlib.AsyncExitStack,
) -> ScriptRuns:
    """The interactive script runs; with Redis, their questions are shared with the other
    processes, and the answers they take for this process's runs reach them."""
    timeout_s = settings.script_answer_timeout_s
    if shared is None:
        runs = ScriptRuns(timeout_s)
    else:
        questions = RedisScriptQuestions(shared.client, keep_s=timeout_s + 60)
        runs = ScriptRuns(timeout_s, shared=questions)
        await _subscription(
            lambda ready: questions.run(runs.take_relayed, ready=ready),
            "the script-answer",
            exit_stack,
        )
    # before the subscription's cancel (LIFO): the runs' questions leave the listing first
    exit_stack.push_async_callback(runs.close)
    return runs


async def _open_tavern(
    settings: ServerSettings, tavern: Tavern | None, exit_stack: contextlib.AsyncExitStack
) -> Tavern:
    """The given Tavern (left open at the end when it was open), else one over the settings'
    home and database (closed at the end)."""
    tk = tavern
    if tk is None:
        tk = Tavern(
            settings.home,
            database=settings.database,
            database_pool=settings.database_pool,
            limits=FormatLimits(lorebook_json_bytes=settings.lorebook_max_bytes),
        )
    opened_here = not tk.runtime.is_open
    await tk.open()
    if opened_here:
        exit_stack.push_async_callback(tk.close)
    return tk


async def _before_listening(
    app: FastAPI, settings: ServerSettings, tk: Tavern, exit_stack: contextlib.AsyncExitStack
) -> None:
    """The warm-up (no first request pays for the tokenizer, the model, the routes) and the
    timed full collections of a serving process."""
    if settings.warm_up:
        loaded = await tk.warm_up()
        await prime_routes(app)
        log.info("warmed up: %s, routes", ", ".join(loaded))
    if settings.gc_full_every_s is not None:
        exit_stack.callback(tune_for_serving())
        collector = asyncio.create_task(full_collections(settings.gc_full_every_s))
        exit_stack.callback(collector.cancel)


def _app(
    settings: ServerSettings,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]],
    tavern: Tavern | None,
) -> FastAPI:
    """The FastAPI app: its docs pages, error handlers, middleware, routers and the plugins'
    routes."""
    app = FastAPI(
        # Swagger UI and ReDoc load their scripts from a CDN: with accounts on, no third-party
        # script runs on the session cookie's origin (the schema stays at /openapi.json)
        docs_url=None if settings.accounts else "/docs",
        redoc_url=None if settings.accounts else "/redoc",
        title="tavernkit",
        summary="SillyTavern-compatible character chat over HTTP",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    # the OpenAI facade answers its 413 in OpenAI's error shape, as its clients parse it
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.upload_max_bytes,
        error_bodies={FACADE_PREFIX: too_large_body},
    )
    app.add_middleware(LoginGate)  # refused logins cost no routing
    app.add_middleware(AccessLog)  # outermost: every answer is logged, refusals too
    for router in ROUTERS:
        app.include_router(router, responses=ERROR_RESPONSES)
    # the plugins' routes come last, so a plugin adds routes and never shadows the server's
    add_plugin_routes(tavern.plugins if tavern is not None else get_plugin_manager(), app)
    return app


async def _listen_for_stops(hub: TurnHub, exit_stack: contextlib.AsyncExitStack) -> None:
    """Run ``hub``'s stop subscription until the app stops; return once it receives."""
    assert hub.stops is not None
    stops = hub.stops
    await _subscription(
        lambda ready: stops.run(hub.stop, ready=ready), "the stop-request", exit_stack
    )


async def _subscription(
    run: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
    what: str,
    exit_stack: contextlib.AsyncExitStack,
) -> None:
    """Run the subscription ``run(ready)`` until the app stops; return once it receives
    (its first failure, or 10 s without it, fails the start)."""
    ready = asyncio.Event()
    task = asyncio.create_task(run(ready))

    async def cancel() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    exit_stack.push_async_callback(cancel)
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiting}, timeout=10.0, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        task.result()  # the subscription failed: its CoordinationError
    if not ready.is_set():
        raise CoordinationError(f"{what} subscription did not start within 10 s")
